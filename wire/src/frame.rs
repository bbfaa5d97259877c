//! The 24-byte frame header of 07 §3.2 and the frame kinds of §3.3.
//!
//! INV-REP-3: for a fixed (epoch, tenure, stream, frame_seq), bytes 0–15 and 17–end are identical
//! on both paths and in every retransmission; only `flags` (byte 16) differs.

use crate::consts::*;
use crate::error::Malformed;
use crate::leb::Reader;

/// Frame kinds (07 §3.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum FrameKind {
    /// Sections LaneRun, StepRun, SessionBind, BlockMark, TenureStart.
    Order = 1,
    /// Sections HashRun.
    Hash = 2,
    /// One 190-byte BlockHeader (substream A only, wire-decisions 24).
    Header = 3,
    /// last_step u64, last_height u64, ptp_now u64.
    Heartbeat = 4,
}

impl FrameKind {
    /// From the wire byte.
    pub fn from_u8(b: u8) -> Option<Self> {
        Some(match b {
            1 => FrameKind::Order,
            2 => FrameKind::Hash,
            3 => FrameKind::Header,
            4 => FrameKind::Heartbeat,
            _ => return None,
        })
    }
    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            FrameKind::Order => "order",
            FrameKind::Hash => "hash",
            FrameKind::Header => "header",
            FrameKind::Heartbeat => "heartbeat",
        }
    }
}

/// `flags` bit 0: path (0 A, 1 B).
pub const FLAG_PATH_B: u8 = 1 << 0;
/// `flags` bit 1: retransmit.
pub const FLAG_RETRANSMIT: u8 = 1 << 1;
/// `flags` bit 2: peer-repaired.
pub const FLAG_PEER_REPAIRED: u8 = 1 << 2;
/// Offset of `flags` in the header.
pub const FLAGS_OFFSET: usize = 16;

/// The frame header (07 §3.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FrameHeader {
    /// Frame kind.
    pub kind: FrameKind,
    /// Book.
    pub book: u16,
    /// Low 16 bits of the epoch.
    pub epoch16: u16,
    /// Per (epoch, tenure, stream), from 1, gapless (07 §2.2).
    pub frame_seq: u64,
    /// Path, retransmit and peer-repaired bits.
    pub flags: u8,
    /// Tenure.
    pub tenure: u8,
    /// Body bytes after the header.
    pub body_len: u16,
    /// Sequencer index (07 §2.2).
    pub sender: u8,
    /// Substream: 0 A, 1 B.
    pub stream: u8,
}

impl FrameHeader {
    /// Write the 24 header bytes.
    pub fn write(&self, out: &mut [u8; REP_FRAME_HDR_BYTES]) {
        out[0..2].copy_from_slice(&FRAME_MAGIC.to_le_bytes());
        out[2] = FRAME_VERSION;
        out[3] = self.kind as u8;
        out[4..6].copy_from_slice(&self.book.to_le_bytes());
        out[6..8].copy_from_slice(&self.epoch16.to_le_bytes());
        out[8..16].copy_from_slice(&self.frame_seq.to_le_bytes());
        out[16] = self.flags;
        out[17] = self.tenure;
        out[18..20].copy_from_slice(&self.body_len.to_le_bytes());
        out[20] = self.sender;
        out[21] = self.stream;
        out[22..24].copy_from_slice(&[0, 0]);
    }

    /// The header as bytes.
    pub fn to_bytes(&self) -> [u8; REP_FRAME_HDR_BYTES] {
        let mut b = [0u8; REP_FRAME_HDR_BYTES];
        self.write(&mut b);
        b
    }

    /// Parse a whole frame: the header, and check that `body_len` matches the bytes present.
    /// Returns the header and the body.
    pub fn parse(frame: &[u8]) -> Result<(FrameHeader, &[u8]), Malformed> {
        let Some(hb) = frame.get(..REP_FRAME_HDR_BYTES) else {
            return Err(Malformed::Truncated);
        };
        let u16_at = |o: usize| u16::from_le_bytes([hb[o], hb[o + 1]]);
        if u16_at(0) != FRAME_MAGIC {
            return Err(Malformed::BadMagic);
        }
        if hb[2] != FRAME_VERSION {
            return Err(Malformed::BadVersion);
        }
        let kind = FrameKind::from_u8(hb[3]).ok_or(Malformed::BadKind)?;
        let flags = hb[16];
        if u16_at(22) != 0 || flags & !(FLAG_PATH_B | FLAG_RETRANSMIT | FLAG_PEER_REPAIRED) != 0 {
            return Err(Malformed::Reserved);
        }
        let stream = hb[21];
        if stream > 1 {
            return Err(Malformed::BadValue);
        }
        let body_len = u16_at(18);
        if frame.len() != REP_FRAME_HDR_BYTES + body_len as usize {
            return Err(Malformed::BadLength);
        }
        let mut fs = [0u8; 8];
        fs.copy_from_slice(&hb[8..16]);
        let h = FrameHeader {
            kind,
            book: u16_at(4),
            epoch16: u16_at(6),
            frame_seq: u64::from_le_bytes(fs),
            flags,
            tenure: hb[17],
            body_len,
            sender: hb[20],
            stream,
        };
        Ok((h, &frame[REP_FRAME_HDR_BYTES..]))
    }
}

/// INV-REP-3: two copies of one frame are the same frame iff every byte but `flags` matches.
pub fn same_frame(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len()
        && a.len() > FLAGS_OFFSET
        && a[..FLAGS_OFFSET] == b[..FLAGS_OFFSET]
        && a[FLAGS_OFFSET + 1..] == b[FLAGS_OFFSET + 1..]
}

/// Set the path bit of a frame in place (the B copy of a frame written to both paths).
pub fn set_path(frame: &mut [u8], path_b: bool) {
    if let Some(f) = frame.get_mut(FLAGS_OFFSET) {
        if path_b {
            *f |= FLAG_PATH_B;
        } else {
            *f &= !FLAG_PATH_B;
        }
    }
}

/// HEARTBEAT body (07 §3.3): 24 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Heartbeat {
    /// Last step this substream carried.
    pub last_step: u64,
    /// Last closed height.
    pub last_height: u64,
    /// PTP time at send.
    pub ptp_now: u64,
}

impl Heartbeat {
    /// Body length.
    pub const LEN: usize = 24;
    /// Encode.
    pub fn to_bytes(&self) -> [u8; 24] {
        let mut b = [0u8; 24];
        b[0..8].copy_from_slice(&self.last_step.to_le_bytes());
        b[8..16].copy_from_slice(&self.last_height.to_le_bytes());
        b[16..24].copy_from_slice(&self.ptp_now.to_le_bytes());
        b
    }
    /// Decode; the body must be exactly 24 bytes.
    pub fn parse(body: &[u8]) -> Result<Self, Malformed> {
        if body.len() != Self::LEN {
            return Err(Malformed::BadLength);
        }
        let mut r = Reader::new(body);
        Ok(Heartbeat {
            last_step: r.u64_le()?,
            last_height: r.u64_le()?,
            ptp_now: r.u64_le()?,
        })
    }
}

/// Build a complete frame (header + body) into `out`, returning its length.
pub fn build_frame(hdr: &FrameHeader, body: &[u8], out: &mut Vec<u8>) {
    let mut h = *hdr;
    h.body_len = body.len() as u16;
    out.clear();
    out.extend_from_slice(&h.to_bytes());
    out.extend_from_slice(body);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame() -> Vec<u8> {
        let h = FrameHeader {
            kind: FrameKind::Order,
            book: 3,
            epoch16: 9,
            frame_seq: 77,
            flags: 0,
            tenure: 1,
            body_len: 0,
            sender: 2,
            stream: 1,
        };
        let mut f = Vec::new();
        build_frame(&h, &[0x07, 0x01, 0x0A, 0x00, 0x00], &mut f);
        f
    }

    #[test]
    fn header_round_trips() {
        let f = frame();
        let (h, body) = FrameHeader::parse(&f).unwrap();
        assert_eq!(
            (h.frame_seq, h.body_len, h.stream, h.sender, h.tenure),
            (77, 5, 1, 2, 1)
        );
        assert_eq!(body, &[0x07, 0x01, 0x0A, 0x00, 0x00]);
        assert_eq!(&h.to_bytes()[..], &f[..REP_FRAME_HDR_BYTES]);
    }

    /// INV-REP-3: path copies and retransmissions differ only in `flags`.
    #[test]
    fn inv_rep_3_only_flags_differ() {
        let a = frame();
        let mut b = a.clone();
        set_path(&mut b, true);
        assert_ne!(a, b);
        assert!(same_frame(&a, &b));
        b[FLAGS_OFFSET] |= FLAG_RETRANSMIT | FLAG_PEER_REPAIRED;
        assert!(same_frame(&a, &b));
        let (hb, _) = FrameHeader::parse(&b).unwrap();
        assert_eq!(hb.flags, FLAG_PATH_B | FLAG_RETRANSMIT | FLAG_PEER_REPAIRED);
        for i in (0..a.len()).filter(|&i| i != FLAGS_OFFSET) {
            let mut c = b.clone();
            c[i] ^= 1;
            assert!(
                !same_frame(&a, &c),
                "byte {i} is part of the frame's identity"
            );
        }
    }

    #[test]
    fn bad_headers_are_typed_errors() {
        let f = frame();
        for (i, want) in [
            (0, Malformed::BadMagic),
            (2, Malformed::BadVersion),
            (3, Malformed::BadKind),
            (22, Malformed::Reserved),
        ] {
            let mut g = f.clone();
            g[i] = 0x55;
            assert_eq!(FrameHeader::parse(&g).unwrap_err(), want);
        }
        let mut g = f.clone();
        g[FLAGS_OFFSET] = 0x08;
        assert_eq!(FrameHeader::parse(&g).unwrap_err(), Malformed::Reserved);
        let mut g = f.clone();
        g[21] = 2;
        assert_eq!(FrameHeader::parse(&g).unwrap_err(), Malformed::BadValue);
        assert_eq!(
            FrameHeader::parse(&f[..f.len() - 1]).unwrap_err(),
            Malformed::BadLength
        );
        assert_eq!(
            FrameHeader::parse(&f[..10]).unwrap_err(),
            Malformed::Truncated
        );
        assert!(Heartbeat::parse(&[0; 23]).is_err());
    }
}
