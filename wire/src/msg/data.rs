//! The data frame of 07 §5.3: a data box's batch of client packets to one replica.
//!
//! ```text
//! off size field
//!   0    2 magic u16 0x4450 ("PD")      2 1 version u8 1     3 1 kind u8 (1 DATA, 2 DATA_HB, 3 FETCH_RESP)
//!   4    2 book BookId                  6 2 epoch16 u16      8 8 data_seq u64
//!  16    1 src u8 (data box index)     17 1 n_pkts u8       18 2 body_len u16   20 4 reserved 0
//!  24    … n_pkts × { pkt_len u16, pkt bytes (pkt_len), one zero pad byte when pkt_len is odd }
//! ```
//!
//! [`DataFrame::parse`] validates the whole frame once and then hands out the packets as
//! borrowed slices ([`DataFrame::packets`]), with no copy. [`DataFrameBuilder`] appends packets
//! into a reusable buffer that is a valid frame after every push, up to `REP_DATA_FRAME_MAX`.

use crate::consts::REP_DATA_FRAME_MAX;
use crate::error::Malformed;
use crate::leb::Reader;
use crate::msg::client::REQ_MIN_LEN;

/// Data frame magic, "PD" (07 §5.3).
pub const DATA_MAGIC: u16 = 0x4450;
/// Data frame version (07 §5.3).
pub const DATA_VERSION: u8 = 1;
/// Data frame header length (07 §5.3).
pub const DATA_HDR_BYTES: usize = 24;
/// Most packets in one frame: `n_pkts` is a u8 (07 §5.3).
pub const DATA_MAX_PKTS: usize = u8::MAX as usize;

/// Data frame kinds (07 §5.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum DataKind {
    /// Packets pushed by the data home (07 §5.2 fan-out).
    Data = 1,
    /// Idle heartbeat, every 100 µs; carries no packet (07 §5.3).
    DataHb = 2,
    /// Packets sent in answer to a `DataFetch` (07 §5.3, §5.5).
    FetchResp = 3,
}

impl DataKind {
    /// From the wire byte.
    pub fn from_u8(b: u8) -> Option<Self> {
        Some(match b {
            1 => DataKind::Data,
            2 => DataKind::DataHb,
            3 => DataKind::FetchResp,
            _ => return None,
        })
    }
}

/// The 24-byte data frame header (07 §5.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DataHeader {
    /// Frame kind.
    pub kind: DataKind,
    /// Book.
    pub book: u16,
    /// Low 16 bits of the epoch.
    pub epoch16: u16,
    /// Per data box and destination, lets a replica detect loss (07 §5.3).
    pub data_seq: u64,
    /// The sending data box's index in `REP_Membership.data_boxes`.
    pub src: u8,
    /// Packets in the body.
    pub n_pkts: u8,
    /// Body bytes after the header.
    pub body_len: u16,
}

impl DataHeader {
    /// Header length.
    pub const LEN: usize = DATA_HDR_BYTES;

    /// The 24 header bytes.
    pub fn to_bytes(&self) -> [u8; DATA_HDR_BYTES] {
        let mut b = [0u8; DATA_HDR_BYTES];
        b[0..2].copy_from_slice(&DATA_MAGIC.to_le_bytes());
        b[2] = DATA_VERSION;
        b[3] = self.kind as u8;
        b[4..6].copy_from_slice(&self.book.to_le_bytes());
        b[6..8].copy_from_slice(&self.epoch16.to_le_bytes());
        b[8..16].copy_from_slice(&self.data_seq.to_le_bytes());
        b[16] = self.src;
        b[17] = self.n_pkts;
        b[18..20].copy_from_slice(&self.body_len.to_le_bytes());
        b
    }

    /// Parse the first 24 bytes of `b` (magic, version, kind, reserved checked).
    pub fn parse_prefix(b: &[u8]) -> Result<Self, Malformed> {
        let mut r = Reader::new(b);
        if r.u16_le()? != DATA_MAGIC {
            return Err(Malformed::BadMagic);
        }
        if r.u8()? != DATA_VERSION {
            return Err(Malformed::BadVersion);
        }
        let kind = DataKind::from_u8(r.u8()?).ok_or(Malformed::BadKind)?;
        let h = DataHeader {
            kind,
            book: r.u16_le()?,
            epoch16: r.u16_le()?,
            data_seq: r.u64_le()?,
            src: r.u8()?,
            n_pkts: r.u8()?,
            body_len: r.u16_le()?,
        };
        if r.u32_le()? != 0 {
            return Err(Malformed::Reserved);
        }
        Ok(h)
    }
}

/// A validated data frame (07 §5.3) borrowing its body; packets are read without copying.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataFrame<'a> {
    /// The header.
    pub header: DataHeader,
    /// The body: `n_pkts` length-prefixed, 2-aligned packets.
    pub body: &'a [u8],
}

impl<'a> DataFrame<'a> {
    /// Parse and validate a whole frame: header, `body_len` against the bytes present, every
    /// packet's length, zero pad bytes, no trailing bytes, ≤ `REP_DATA_FRAME_MAX` in all, no
    /// empty packet, and no packet in a `DATA_HB`.
    pub fn parse(frame: &'a [u8]) -> Result<Self, Malformed> {
        if frame.len() > REP_DATA_FRAME_MAX {
            return Err(Malformed::BadLength);
        }
        let header = DataHeader::parse_prefix(frame)?;
        let body = &frame[DATA_HDR_BYTES..];
        if body.len() != header.body_len as usize {
            return Err(Malformed::BadLength);
        }
        if header.kind == DataKind::DataHb && header.n_pkts != 0 {
            return Err(Malformed::BadValue);
        }
        let mut r = Reader::new(body);
        for _ in 0..header.n_pkts {
            let len = r.u16_le()? as usize;
            if len == 0 {
                return Err(Malformed::BadValue);
            }
            r.bytes(len)?;
            if len % 2 == 1 && r.u8()? != 0 {
                return Err(Malformed::Reserved);
            }
        }
        crate::msg::finish(&r)?;
        Ok(DataFrame { header, body })
    }

    /// The packets, in order, as slices of the frame.
    pub fn packets(&self) -> Packets<'a> {
        Packets {
            body: self.body,
            left: self.header.n_pkts,
        }
    }

    /// Append the frame's bytes (the header's `body_len` is taken from `body`).
    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut h = self.header;
        h.body_len = self.body.len() as u16;
        out.extend_from_slice(&h.to_bytes());
        out.extend_from_slice(self.body);
    }
}

/// Iterator over the packets of a validated [`DataFrame`].
#[derive(Debug, Clone)]
pub struct Packets<'a> {
    body: &'a [u8],
    left: u8,
}

impl<'a> Iterator for Packets<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        if self.left == 0 {
            return None;
        }
        let len = u16::from_le_bytes([*self.body.first()?, *self.body.get(1)?]) as usize;
        let pkt = self.body.get(2..2 + len)?;
        let step = (2 + len + (len & 1)).min(self.body.len());
        self.body = &self.body[step..];
        self.left -= 1;
        Some(pkt)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.left as usize))
    }
}

/// Why [`DataFrameBuilder::push`] did not take a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PushError {
    /// The frame has no room for this packet (bytes or the 255-packet count): send it, then
    /// push again into a fresh frame.
    Full,
    /// The packet cannot fit even an empty frame of this builder's cap.
    TooLarge,
    /// An empty packet.
    Empty,
    /// A `DATA_HB` frame carries no packet.
    Heartbeat,
}

/// Builds one data frame in a reusable buffer (07 §5.2 fan-out). The buffer is a complete,
/// valid frame after every call; it is full at `REP_DATA_FRAME_MAX` bytes (or a smaller cap).
#[derive(Debug, Clone)]
pub struct DataFrameBuilder {
    buf: Vec<u8>,
    cap: usize,
}

impl DataFrameBuilder {
    /// An empty frame capped at `REP_DATA_FRAME_MAX` bytes, header included.
    pub fn new(kind: DataKind, book: u16, epoch16: u16, data_seq: u64, src: u8) -> Self {
        Self::with_cap(kind, book, epoch16, data_seq, src, REP_DATA_FRAME_MAX)
    }

    /// An empty frame with a smaller cap (clamped to `DATA_HDR_BYTES..=REP_DATA_FRAME_MAX`).
    pub fn with_cap(
        kind: DataKind,
        book: u16,
        epoch16: u16,
        data_seq: u64,
        src: u8,
        cap: usize,
    ) -> Self {
        let h = DataHeader {
            kind,
            book,
            epoch16,
            data_seq,
            src,
            n_pkts: 0,
            body_len: 0,
        };
        let cap = cap.clamp(DATA_HDR_BYTES, REP_DATA_FRAME_MAX);
        let mut buf = Vec::with_capacity(cap);
        buf.extend_from_slice(&h.to_bytes());
        DataFrameBuilder { buf, cap }
    }

    /// Wire bytes a packet of `len` bytes takes: length prefix, bytes, pad.
    pub const fn slot_len(len: usize) -> usize {
        2 + len + (len & 1)
    }

    /// Packets so far.
    pub fn n_pkts(&self) -> usize {
        self.buf[17] as usize
    }

    /// True when the frame holds no packet.
    pub fn is_empty(&self) -> bool {
        self.n_pkts() == 0
    }

    /// Frame bytes so far, header included.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// Whether a packet of `len` bytes fits now.
    pub fn fits(&self, len: usize) -> bool {
        self.n_pkts() < DATA_MAX_PKTS && self.buf.len() + Self::slot_len(len) <= self.cap
    }

    /// Full: not even the smallest client packet (`REQ_MIN_LEN` = 48 B) fits any more.
    pub fn is_full(&self) -> bool {
        !self.fits(REQ_MIN_LEN)
    }

    /// Append one packet.
    pub fn push(&mut self, pkt: &[u8]) -> Result<(), PushError> {
        if pkt.is_empty() {
            return Err(PushError::Empty);
        }
        if self.buf[3] == DataKind::DataHb as u8 {
            return Err(PushError::Heartbeat);
        }
        if DATA_HDR_BYTES + Self::slot_len(pkt.len()) > self.cap {
            return Err(PushError::TooLarge);
        }
        if !self.fits(pkt.len()) {
            return Err(PushError::Full);
        }
        self.buf
            .extend_from_slice(&(pkt.len() as u16).to_le_bytes());
        self.buf.extend_from_slice(pkt);
        if pkt.len() % 2 == 1 {
            self.buf.push(0);
        }
        self.buf[17] += 1;
        let body_len = (self.buf.len() - DATA_HDR_BYTES) as u16;
        self.buf[18..20].copy_from_slice(&body_len.to_le_bytes());
        Ok(())
    }

    /// The frame as it stands: always a valid frame.
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf
    }

    /// Drop the packets and start the next frame under `data_seq`, keeping the buffer.
    pub fn reset(&mut self, data_seq: u64) {
        self.buf.truncate(DATA_HDR_BYTES);
        self.buf[8..16].copy_from_slice(&data_seq.to_le_bytes());
        self.buf[17] = 0;
        self.buf[18..20].copy_from_slice(&[0, 0]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn msg_data_builder_fills_to_cap() {
        let mut b = DataFrameBuilder::new(DataKind::Data, 1, 2, 3, 0);
        let pkt = [7u8; 192];
        let mut n = 0;
        while b.push(&pkt).is_ok() {
            n += 1;
        }
        // 24 + n × 194 ≤ 9000 → n = 46.
        assert_eq!(n, (REP_DATA_FRAME_MAX - DATA_HDR_BYTES) / 194);
        assert_eq!(b.push(&pkt), Err(PushError::Full));
        let f = DataFrame::parse(b.as_bytes()).unwrap();
        assert_eq!(f.packets().count(), n);
        assert!(f.packets().all(|p| p == pkt));
        b.reset(4);
        assert!(b.is_empty());
        let f = DataFrame::parse(b.as_bytes()).unwrap();
        assert_eq!(f.header.data_seq, 4);
        assert_eq!(f.packets().next(), None);
    }
}
