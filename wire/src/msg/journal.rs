//! `REP_BlockRecord`, one block in the replica's block journal (07 §8.2).
//!
//! ```text
//! off size field
//!   0    8 magic "PBBLK001"     8 8 height u64    16 4 epoch u32    20 1 tenure u8
//!  21    1 kind u8 (0 normal, 1 seal)            22 2 reserved 0
//!  24  190 BlockHeader (07 §3.10)
//! 214    4 order_len u32      218 4 hash_len u32  222 4 data_len u32  226 4 n_unavail u32
//! 230   26 reserved 0
//! 256    … order bytes (order_len) │ pkt_hash list (hash_len = 8 × records, u64 LE each)
//!          │ data bytes (data_len; client packets in O-order, each 32 + 16·count bytes)
//!          │ unavailable list (n_unavail × {session u32, pkt_seq u32}, strictly ascending)
//!          │ zero padding to a multiple of 4096
//! ```
//!
//! [`BlockRecordRef::parse`] validates a record in place and borrows its sections;
//! [`RepBlockRecord`] is the owned form with the encoder.

use crate::consts::BLOCK_HEADER_BYTES;
use crate::consts::MAX_MSGS_PER_PKT;
use crate::error::Malformed;
use crate::header::BlockHeader;
use crate::leb::Reader;
use crate::msg::client::{REQ_HDR_BYTES, REQ_MSG_BYTES, REQ_TAG_BYTES};
use crate::msg::{keys_ascending, put_u32, read_keys, PktKey, MAX_UNAVAIL};

/// Record magic (07 §8.2).
pub const BLOCK_MAGIC: [u8; 8] = *b"PBBLK001";
/// Fixed head length; sections start here (07 §8.2).
pub const BLOCK_HEAD_BYTES: usize = 256;
/// Records are padded to a multiple of this (07 §8.2: 4 KiB aligned).
pub const BLOCK_ALIGN: usize = 4096;

/// `REP_BlockRecord.kind` (07 §8.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum BlockKind {
    /// A block with a sequencer-signed header.
    Normal = 0,
    /// A seal block (07 §9.4): `seq_sig` is 64 zero bytes.
    Seal = 1,
}

/// A validated `REP_BlockRecord` borrowing its sections from the journal buffer (07 §8.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockRecordRef<'a> {
    /// Height; equals `header.height`.
    pub height: u64,
    /// Epoch; equals `header.epoch`.
    pub epoch: u32,
    /// Tenure that produced the block.
    pub tenure: u8,
    /// Normal or seal; seal iff `header.seq_sig` is all zero.
    pub kind: BlockKind,
    /// The block header.
    pub header: BlockHeader,
    /// ORDER section bytes of the block.
    pub order: &'a [u8],
    /// The pkt_hash list, 8 bytes per record (see [`pkt_hashes`](Self::pkt_hashes)).
    pub hashes: &'a [u8],
    /// Payloads in O-order (see [`packets`](Self::packets)).
    pub data: &'a [u8],
    /// The unavailable list, 8 bytes per entry (see [`unavail`](Self::unavail)).
    pub unavail_bytes: &'a [u8],
}

/// Packet length from its count byte, or `None` if the count is outside `1..=10`.
fn pkt_len(count: u8) -> Option<usize> {
    if count == 0 || count as usize > MAX_MSGS_PER_PKT {
        return None;
    }
    Some(REQ_HDR_BYTES + REQ_MSG_BYTES * count as usize + REQ_TAG_BYTES)
}

/// Check that `data` splits exactly into client packets (byte 2 = count ∈ 1..=10).
fn check_data(data: &[u8]) -> Result<usize, Malformed> {
    let mut off = 0usize;
    let mut n = 0usize;
    while off < data.len() {
        let count = *data.get(off + 2).ok_or(Malformed::Truncated)?;
        let len = pkt_len(count).ok_or(Malformed::BadValue)?;
        if data.len() - off < len {
            return Err(Malformed::Truncated);
        }
        off += len;
        n += 1;
    }
    Ok(n)
}

fn round_up(n: u64) -> u64 {
    n.div_ceil(BLOCK_ALIGN as u64) * BLOCK_ALIGN as u64
}

impl<'a> BlockRecordRef<'a> {
    /// Validate one whole record: magic, reserved fields, kind against the header, height and
    /// epoch against the header, every length against the buffer, `hash_len % 8 == 0`, the data
    /// section splitting exactly into packets, an ascending unavailable list, the total length
    /// being the 4 KiB round-up of the content, and all-zero padding.
    pub fn parse(b: &'a [u8]) -> Result<Self, Malformed> {
        let mut r = Reader::new(b);
        if r.array::<8>()? != BLOCK_MAGIC {
            return Err(Malformed::BadMagic);
        }
        let height = r.u64_le()?;
        let epoch = r.u32_le()?;
        let tenure = r.u8()?;
        let kind = match r.u8()? {
            0 => BlockKind::Normal,
            1 => BlockKind::Seal,
            _ => return Err(Malformed::BadKind),
        };
        if r.u16_le()? != 0 {
            return Err(Malformed::Reserved);
        }
        let header = BlockHeader::parse(r.bytes(BLOCK_HEADER_BYTES)?)?;
        let order_len = r.u32_le()? as u64;
        let hash_len = r.u32_le()? as u64;
        let data_len = r.u32_le()? as u64;
        let n_unavail = r.u32_le()? as u64;
        if r.bytes(26)?.iter().any(|&x| x != 0) {
            return Err(Malformed::Reserved);
        }
        if header.height != height || header.epoch != epoch {
            return Err(Malformed::BadValue);
        }
        if header.is_seal() != (kind == BlockKind::Seal) {
            return Err(Malformed::BadValue);
        }
        if hash_len % 8 != 0 {
            return Err(Malformed::BadLength);
        }
        if n_unavail > MAX_UNAVAIL as u64 {
            return Err(Malformed::TooMany);
        }
        // All u32-sized, so the u64 sum cannot overflow.
        let content = BLOCK_HEAD_BYTES as u64 + order_len + hash_len + data_len + 8 * n_unavail;
        if content > b.len() as u64 {
            return Err(Malformed::Truncated);
        }
        if round_up(content) != b.len() as u64 {
            return Err(Malformed::BadLength);
        }
        let order = r.bytes(order_len as usize)?;
        let hashes = r.bytes(hash_len as usize)?;
        let data = r.bytes(data_len as usize)?;
        check_data(data)?;
        let unavail_bytes = r.bytes(8 * n_unavail as usize)?;
        read_keys(&mut Reader::new(unavail_bytes), n_unavail as usize)?;
        if r.bytes(r.remaining())?.iter().any(|&x| x != 0) {
            return Err(Malformed::Reserved);
        }
        Ok(BlockRecordRef {
            height,
            epoch,
            tenure,
            kind,
            header,
            order,
            hashes,
            data,
            unavail_bytes,
        })
    }

    /// The pkt_hash list as `u64`s (`u64::from_le_bytes(digest[0..8])`, wire-decisions 25).
    pub fn pkt_hashes(&self) -> impl Iterator<Item = u64> + 'a {
        self.hashes.chunks_exact(8).map(|c| {
            let mut a = [0u8; 8];
            a.copy_from_slice(c);
            u64::from_le_bytes(a)
        })
    }

    /// The payloads, in O-order.
    pub fn packets(&self) -> BlockPackets<'a> {
        BlockPackets { data: self.data }
    }

    /// The unavailable `(session, pkt_seq)` list.
    pub fn unavail(&self) -> impl Iterator<Item = PktKey> + 'a {
        self.unavail_bytes.chunks_exact(8).map(|c| PktKey {
            session: u32::from_le_bytes([c[0], c[1], c[2], c[3]]),
            pkt_seq: u32::from_le_bytes([c[4], c[5], c[6], c[7]]),
        })
    }

    /// Copy into the owned form.
    pub fn to_record(&self) -> RepBlockRecord {
        RepBlockRecord {
            tenure: self.tenure,
            header: self.header,
            order: self.order.to_vec(),
            pkt_hashes: self.pkt_hashes().collect(),
            data: self.data.to_vec(),
            unavail: self.unavail().collect(),
        }
    }
}

/// Iterator over the payloads of a validated block record.
#[derive(Debug, Clone)]
pub struct BlockPackets<'a> {
    data: &'a [u8],
}

impl<'a> Iterator for BlockPackets<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        let len = pkt_len(*self.data.get(2)?)?;
        let p = self.data.get(..len)?;
        self.data = &self.data[len..];
        Some(p)
    }
}

/// `REP_BlockRecord`, owned (07 §8.2). `height`, `epoch` and `kind` are taken from `header`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepBlockRecord {
    /// Tenure that produced the block.
    pub tenure: u8,
    /// The block header; a seal block has `seq_sig` = 64 zero bytes.
    pub header: BlockHeader,
    /// ORDER section bytes of the block.
    pub order: Vec<u8>,
    /// pkt_hash of each record, in O-order.
    pub pkt_hashes: Vec<u64>,
    /// Client packets in O-order, concatenated (each self-delimiting by its count byte).
    pub data: Vec<u8>,
    /// Unavailable packets, strictly ascending.
    pub unavail: Vec<PktKey>,
}

impl RepBlockRecord {
    /// Normal or seal, from the header.
    pub fn kind(&self) -> BlockKind {
        if self.header.is_seal() {
            BlockKind::Seal
        } else {
            BlockKind::Normal
        }
    }

    /// Unpadded content length (head + sections).
    pub fn content_len(&self) -> usize {
        BLOCK_HEAD_BYTES
            + self.order.len()
            + 8 * self.pkt_hashes.len()
            + self.data.len()
            + PktKey::LEN * self.unavail.len()
    }

    /// Append the record, padded with zeros to a multiple of 4096 bytes. Fails where `parse`
    /// would: a section over u32::MAX bytes, too many or unsorted unavailable entries, or data
    /// that does not split into packets.
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), Malformed> {
        let order_len = u32::try_from(self.order.len()).map_err(|_| Malformed::TooMany)?;
        let hash_len =
            u32::try_from(8 * self.pkt_hashes.len() as u64).map_err(|_| Malformed::TooMany)?;
        let data_len = u32::try_from(self.data.len()).map_err(|_| Malformed::TooMany)?;
        if self.unavail.len() > MAX_UNAVAIL {
            return Err(Malformed::TooMany);
        }
        if !keys_ascending(&self.unavail) {
            return Err(Malformed::BadValue);
        }
        check_data(&self.data)?;
        let start = out.len();
        out.reserve(round_up(self.content_len() as u64) as usize);
        out.extend_from_slice(&BLOCK_MAGIC);
        out.extend_from_slice(&self.header.height.to_le_bytes());
        put_u32(out, self.header.epoch);
        out.push(self.tenure);
        out.push(self.kind() as u8);
        out.extend_from_slice(&[0, 0]);
        out.extend_from_slice(&self.header.to_bytes());
        put_u32(out, order_len);
        put_u32(out, hash_len);
        put_u32(out, data_len);
        put_u32(out, self.unavail.len() as u32);
        out.extend_from_slice(&[0u8; 26]);
        out.extend_from_slice(&self.order);
        for h in &self.pkt_hashes {
            out.extend_from_slice(&h.to_le_bytes());
        }
        out.extend_from_slice(&self.data);
        for k in &self.unavail {
            k.encode(out);
        }
        let len = out.len() - start;
        out.resize(start + round_up(len as u64) as usize, 0);
        Ok(())
    }

    /// The padded record bytes.
    pub fn to_bytes(&self) -> Result<Vec<u8>, Malformed> {
        let mut v = Vec::new();
        self.encode(&mut v)?;
        Ok(v)
    }

    /// Parse one whole record (see [`BlockRecordRef::parse`]) into the owned form.
    pub fn parse(b: &[u8]) -> Result<Self, Malformed> {
        Ok(BlockRecordRef::parse(b)?.to_record())
    }
}
