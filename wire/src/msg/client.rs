//! Client packets (missing-chapters §2; 07 §5.2, §5.7, §6.9, §8.5, §9.5): the request packet,
//! its SipHash tag and full hash, and the response packet this project defines.
//!
//! Request (missing-chapters §2), `len = 32 + 16·count`:
//!
//! ```text
//!   0  2 book u16            2 1 count u8 (1..=10)    3 1 flags u8 (bit0 resend, others 0)
//!   4  4 session u32         8 4 pkt_seq u32 (from 1) 12 4 reserved 0
//!  16 16·count messages: type u8 (1 GTC, 2 IOC, 3 Cancel), flags u8 (bit0 side), reserved u16 0,
//!                        tick i32, qty u32, client_tag u32
//!  16+16n 16 tag_seq = SipHash-2-4-128(K_seq, bytes 0..16+16n), h1 LE ‖ h2 LE
//! ```
//!
//! Response (this project, `docs/wire-messages.md`), `len = 40 + 32·count`:
//!
//! ```text
//!   0  4 session u32         4 4 echo_pkt_seq u32 (0: unsolicited)   8 8 resp_seq u64 (from 1)
//!  16  1 count u8 (1..=40)  17 1 flags u8 (bit0 resend)             18 6 reserved 0
//!  24 32·count records (type u8, msg_index u8, reserved u16, 28 bytes of fields)
//!  24+32n 16 tag_out = SipHash-2-4-128(K_out, bytes 0..24+32n), h1 LE ‖ h2 LE
//! ```

use core::fmt;

use siphasher::sip128::SipHasher24;

use crate::consts::MAX_MSGS_PER_PKT;
use crate::error::Malformed;
use crate::header::Hash;
use crate::leb::Reader;
use crate::msg::consensus::NEXT_SEQ_NONE;
use crate::msg::{ct_eq16, Addr18};

/// Request header bytes.
pub const REQ_HDR_BYTES: usize = 16;
/// Bytes of one numbered message.
pub const REQ_MSG_BYTES: usize = 16;
/// Bytes of `tag_seq`.
pub const REQ_TAG_BYTES: usize = 16;
/// Shortest request: one message.
pub const REQ_MIN_LEN: usize = REQ_HDR_BYTES + REQ_MSG_BYTES + REQ_TAG_BYTES;
/// Longest request: ten messages.
pub const REQ_MAX_LEN: usize = REQ_HDR_BYTES + REQ_MSG_BYTES * MAX_MSGS_PER_PKT + REQ_TAG_BYTES;
/// Request `flags` bit 0: a resend of a packet already sent (07 §5.7, §9.5).
pub const REQ_FLAG_RESEND: u8 = 1;
/// Message `flags` bit 0: side, 0 buy, 1 sell.
pub const MSG_FLAG_SELL: u8 = 1;

/// Response header bytes.
pub const RESP_HDR_BYTES: usize = 24;
/// Bytes of one response record.
pub const RESP_RECORD_BYTES: usize = 32;
/// Bytes of `tag_out`.
pub const RESP_TAG_BYTES: usize = 16;
/// Most records in one response packet: 40 × 32 + 40 = 1320 bytes, inside a 1500-byte MTU.
pub const RESP_MAX_RECORDS: usize = 40;
/// Response `flags` bit 0: rebuilt and resent (07 §8.5).
pub const RESP_FLAG_RESEND: u8 = 1;
/// `resp_seq` of a **notice**: a response packet of unsolicited records only (`Durable`,
/// `Final`, `Halted`, `SeqChange`, `DataRedirect`) sent outside the session's numbering — by
/// control (watermarks, 07 §6.9) or a data box (07 §5.7, §9.5), which cannot know the session's
/// `resp_seq`. Clients dedupe notices by content (watermarks are monotone).
pub const NOTICE_RESP_SEQ: u64 = u64::MAX;

/// `msg_index` of a record that answers no single message (packet-level or unsolicited).
pub const MSG_INDEX_NONE: u8 = 0xFF;

/// A 16-byte SipHash key (`K_seq`, `K_out`).
pub type SipKey = [u8; 16];

/// SipHash-2-4 with 128-bit output under `key` (key bytes read as two little-endian u64s, as
/// the reference C code does), output `h1` then `h2`, each little-endian: the 16 bytes the
/// reference C implementation writes, = `u128::to_le_bytes(h1 | h2 << 64)`.
pub fn siphash128(key: &SipKey, bytes: &[u8]) -> [u8; 16] {
    let h = SipHasher24::new_with_key(key).hash(bytes);
    let mut out = [0u8; 16];
    out[..8].copy_from_slice(&h.h1.to_le_bytes());
    out[8..].copy_from_slice(&h.h2.to_le_bytes());
    out
}

/// Request length for `count` messages: `32 + 16·count`.
pub const fn req_len(count: usize) -> usize {
    REQ_HDR_BYTES + REQ_MSG_BYTES * count + REQ_TAG_BYTES
}

/// Why a request packet or one of its messages is refused. Packet-level codes (`BadLen` …
/// `BadTag`) refuse the whole packet; message-level codes (`BadType` …) refuse one message.
/// The discriminant is the `detail` of the `Reject{BAD_MSG}` record (see [`ReqReject::code`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ReqReject {
    /// Length is not `32 + 16·count`, or below 48.
    BadLen = 1,
    /// `count` outside 1..=10.
    BadCount = 2,
    /// A packet flag other than bit 0 set.
    BadFlags = 3,
    /// Packet reserved bytes 12..16 not zero.
    BadReserved = 4,
    /// `pkt_seq` is 0 (sequence numbers start at 1).
    BadSeq = 5,
    /// `tag_seq` does not verify under the session's `K_seq`.
    BadTag = 6,
    /// Message type not 1, 2 or 3.
    BadType = 16,
    /// A message flag other than bit 0 (side) set.
    BadMsgFlags = 17,
    /// Message reserved bytes 2..4 not zero.
    BadMsgReserved = 18,
    /// A New with `qty` 0.
    BadQty = 19,
    /// A Cancel with a nonzero `tick` or `qty`.
    BadCancel = 20,
}

impl ReqReject {
    /// Whether this refuses the whole packet (else one message).
    pub fn is_packet_level(self) -> bool {
        (self as u8) < 16
    }

    /// The response code: `BAD_SEQ`, `BAD_TAG`, else `BAD_MSG` with [`detail`](Self::detail).
    pub fn code(self) -> RejectCode {
        match self {
            ReqReject::BadSeq => RejectCode::BadSeq,
            ReqReject::BadTag => RejectCode::BadTag,
            _ => RejectCode::BadMsg,
        }
    }

    /// The `detail` of the Reject record: this code's number.
    pub fn detail(self) -> u64 {
        self as u64
    }
}

impl fmt::Display for ReqReject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

impl std::error::Error for ReqReject {}

/// Message type (missing-chapters §2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum MsgType {
    /// New limit order, good till cancelled.
    NewGtc = 1,
    /// New limit order, immediate or cancel.
    NewIoc = 2,
    /// Cancel the order whose `client_tag` is given.
    Cancel = 3,
}

/// Side (missing-chapters §2, message flags bit 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Side {
    /// Buy (0).
    Buy = 0,
    /// Sell (1).
    Sell = 1,
}

/// One 16-byte numbered message (missing-chapters §2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Msg {
    /// New GTC, New IOC or Cancel.
    pub kind: MsgType,
    /// Side (carried, and ignored, on a Cancel).
    pub side: Side,
    /// Limit price in ticks; 0 for a Cancel.
    pub tick: i32,
    /// Quantity, ≥ 1 for a New; 0 for a Cancel.
    pub qty: u32,
    /// The client's name for the order (a Cancel names the order to cancel).
    pub client_tag: u32,
}

impl Msg {
    /// The 16 wire bytes.
    pub fn to_bytes(&self) -> [u8; REQ_MSG_BYTES] {
        let mut b = [0u8; REQ_MSG_BYTES];
        b[0] = self.kind as u8;
        b[1] = self.side as u8;
        b[4..8].copy_from_slice(&self.tick.to_le_bytes());
        b[8..12].copy_from_slice(&self.qty.to_le_bytes());
        b[12..16].copy_from_slice(&self.client_tag.to_le_bytes());
        b
    }

    /// Parse exactly 16 bytes.
    pub fn parse(b: &[u8]) -> Result<Self, ReqReject> {
        let b: &[u8; REQ_MSG_BYTES] = b.try_into().map_err(|_| ReqReject::BadLen)?;
        let kind = match b[0] {
            1 => MsgType::NewGtc,
            2 => MsgType::NewIoc,
            3 => MsgType::Cancel,
            _ => return Err(ReqReject::BadType),
        };
        if b[1] & !MSG_FLAG_SELL != 0 {
            return Err(ReqReject::BadMsgFlags);
        }
        if b[2] != 0 || b[3] != 0 {
            return Err(ReqReject::BadMsgReserved);
        }
        let m = Msg {
            kind,
            side: if b[1] & MSG_FLAG_SELL != 0 {
                Side::Sell
            } else {
                Side::Buy
            },
            tick: i32::from_le_bytes([b[4], b[5], b[6], b[7]]),
            qty: u32::from_le_bytes([b[8], b[9], b[10], b[11]]),
            client_tag: u32::from_le_bytes([b[12], b[13], b[14], b[15]]),
        };
        m.check()?;
        Ok(m)
    }

    /// The value rules: a New has `qty ≥ 1`; a Cancel has `tick = qty = 0`.
    pub fn check(&self) -> Result<(), ReqReject> {
        match self.kind {
            MsgType::Cancel if self.tick != 0 || self.qty != 0 => Err(ReqReject::BadCancel),
            MsgType::NewGtc | MsgType::NewIoc if self.qty == 0 => Err(ReqReject::BadQty),
            _ => Ok(()),
        }
    }
}

/// A request packet whose structure has been checked (length, count, flags, reserved,
/// `pkt_seq ≥ 1`), borrowing its bytes. Messages are parsed on demand, one reject each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request<'a> {
    buf: &'a [u8],
}

impl<'a> Request<'a> {
    /// Check the packet structure (not the tag).
    pub fn parse(buf: &'a [u8]) -> Result<Self, ReqReject> {
        if buf.len() < REQ_MIN_LEN {
            return Err(ReqReject::BadLen);
        }
        let count = buf[2] as usize;
        if count == 0 || count > MAX_MSGS_PER_PKT {
            return Err(ReqReject::BadCount);
        }
        if buf.len() != req_len(count) {
            return Err(ReqReject::BadLen);
        }
        if buf[3] & !REQ_FLAG_RESEND != 0 {
            return Err(ReqReject::BadFlags);
        }
        if buf[12..16] != [0, 0, 0, 0] {
            return Err(ReqReject::BadReserved);
        }
        let r = Request { buf };
        if r.pkt_seq() == 0 {
            return Err(ReqReject::BadSeq);
        }
        Ok(r)
    }

    /// [`parse`](Self::parse), then [`verify_tag`](Self::verify_tag).
    pub fn parse_verified(buf: &'a [u8], k_seq: &SipKey) -> Result<Self, ReqReject> {
        let r = Self::parse(buf)?;
        r.verify_tag(k_seq)?;
        Ok(r)
    }

    /// Check `tag_seq` (constant time) over the bytes as sent, flags included.
    pub fn verify_tag(&self, k_seq: &SipKey) -> Result<(), ReqReject> {
        if ct_eq16(&siphash128(k_seq, self.signed_part()), &self.tag()) {
            Ok(())
        } else {
            Err(ReqReject::BadTag)
        }
    }

    /// The whole packet.
    pub fn bytes(&self) -> &'a [u8] {
        self.buf
    }
    /// Bytes `0..16+16n`, which the tag covers.
    pub fn signed_part(&self) -> &'a [u8] {
        &self.buf[..self.buf.len() - REQ_TAG_BYTES]
    }
    /// `tag_seq`.
    pub fn tag(&self) -> [u8; 16] {
        let mut t = [0u8; 16];
        t.copy_from_slice(&self.buf[self.buf.len() - REQ_TAG_BYTES..]);
        t
    }
    /// Book.
    pub fn book(&self) -> u16 {
        u16::from_le_bytes([self.buf[0], self.buf[1]])
    }
    /// Number of messages, 1..=10.
    pub fn count(&self) -> usize {
        self.buf[2] as usize
    }
    /// `flags.resend`.
    pub fn resend(&self) -> bool {
        self.buf[3] & REQ_FLAG_RESEND != 0
    }
    /// Session.
    pub fn session(&self) -> u32 {
        u32::from_le_bytes([self.buf[4], self.buf[5], self.buf[6], self.buf[7]])
    }
    /// pkt_seq.
    pub fn pkt_seq(&self) -> u32 {
        u32::from_le_bytes([self.buf[8], self.buf[9], self.buf[10], self.buf[11]])
    }
    /// Raw bytes of message `i`, if `i < count`.
    pub fn msg_bytes(&self, i: usize) -> Option<&'a [u8]> {
        if i >= self.count() {
            return None;
        }
        let off = REQ_HDR_BYTES + REQ_MSG_BYTES * i;
        self.buf.get(off..off + REQ_MSG_BYTES)
    }
    /// Message `i` parsed, if `i < count`.
    pub fn msg(&self, i: usize) -> Option<Result<Msg, ReqReject>> {
        self.msg_bytes(i).map(Msg::parse)
    }
    /// Every message, parsed, in order.
    pub fn msgs(&self) -> impl Iterator<Item = Result<Msg, ReqReject>> + 'a {
        let this = *self;
        (0..this.count()).filter_map(move |i| this.msg(i))
    }
    /// The packet's full hash (see [`full_hash`]).
    pub fn full_hash(&self) -> Hash {
        full_hash_signed(self.signed_part())
    }
    /// `pkt_hash`: the first 8 bytes of the full hash as a little-endian u64 (wire-decisions 25).
    pub fn pkt_hash(&self) -> u64 {
        pkt_hash_of(&self.full_hash())
    }
}

/// The full hash of a packet's signed part (`0..16+16n`, the tag already cut off), byte 3
/// (flags) read as 0, with no check of the length structure (a shorter slice hashes whatever
/// bytes it has; one longer than a packet's signed part is cut at `REQ_MAX_LEN`). One stack copy,
/// then the one-shot `blake3::hash`: three `Hasher::update` calls (the first 3 bytes, a zero, the
/// rest) cost the replica's data side ~20 % of its time (perf, `--bench replica`).
#[inline]
pub fn full_hash_signed(signed: &[u8]) -> Hash {
    let n = signed.len().min(REQ_MAX_LEN);
    let mut buf = [0u8; REQ_MAX_LEN];
    buf[..n].copy_from_slice(&signed[..n]);
    if n > 3 {
        buf[3] = 0;
    }
    *blake3::hash(&buf[..n]).as_bytes()
}

/// `pkt_hash` from a full hash: `u64::from_le_bytes(full_hash[0..8])`.
pub fn pkt_hash_of(full: &Hash) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&full[..8]);
    u64::from_le_bytes(a)
}

/// Full hash of a request packet: BLAKE3-256 over bytes `0..16+16n` with the tag excluded and
/// byte 3 (flags) read as 0, so a resend hashes like its original (missing-chapters §2, 07 §5.2).
/// Only the length structure is checked (`BadLen`, `BadCount`).
pub fn full_hash(pkt: &[u8]) -> Result<Hash, ReqReject> {
    if pkt.len() < REQ_MIN_LEN {
        return Err(ReqReject::BadLen);
    }
    let count = pkt[2] as usize;
    if count == 0 || count > MAX_MSGS_PER_PKT {
        return Err(ReqReject::BadCount);
    }
    if pkt.len() != req_len(count) {
        return Err(ReqReject::BadLen);
    }
    Ok(full_hash_signed(&pkt[..pkt.len() - REQ_TAG_BYTES]))
}

/// `pkt_hash` of a request packet: the first 8 bytes of [`full_hash`], little-endian.
pub fn pkt_hash(pkt: &[u8]) -> Result<u64, ReqReject> {
    Ok(pkt_hash_of(&full_hash(pkt)?))
}

/// A request packet, owned (the client's side).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RequestPacket {
    /// Book.
    pub book: u16,
    /// `flags.resend`.
    pub resend: bool,
    /// Session.
    pub session: u32,
    /// pkt_seq, ≥ 1.
    pub pkt_seq: u32,
    /// 1..=10 messages.
    pub msgs: Vec<Msg>,
}

impl RequestPacket {
    /// Append the packet with its tag under `k_seq`. Fails, writing nothing, on a count outside
    /// 1..=10, `pkt_seq` 0 or an invalid message.
    pub fn encode(&self, k_seq: &SipKey, out: &mut Vec<u8>) -> Result<(), ReqReject> {
        if self.msgs.is_empty() || self.msgs.len() > MAX_MSGS_PER_PKT {
            return Err(ReqReject::BadCount);
        }
        if self.pkt_seq == 0 {
            return Err(ReqReject::BadSeq);
        }
        for m in &self.msgs {
            m.check()?;
        }
        let start = out.len();
        out.extend_from_slice(&self.book.to_le_bytes());
        out.push(self.msgs.len() as u8);
        out.push(if self.resend { REQ_FLAG_RESEND } else { 0 });
        out.extend_from_slice(&self.session.to_le_bytes());
        out.extend_from_slice(&self.pkt_seq.to_le_bytes());
        out.extend_from_slice(&[0; 4]);
        for m in &self.msgs {
            out.extend_from_slice(&m.to_bytes());
        }
        let tag = siphash128(k_seq, &out[start..]);
        out.extend_from_slice(&tag);
        Ok(())
    }

    /// The packet bytes.
    pub fn to_bytes(&self, k_seq: &SipKey) -> Result<Vec<u8>, ReqReject> {
        let mut v = Vec::with_capacity(req_len(self.msgs.len()));
        self.encode(k_seq, &mut v)?;
        Ok(v)
    }

    /// Parse, verify the tag, and parse every message (the first refusal is returned).
    pub fn parse(buf: &[u8], k_seq: &SipKey) -> Result<Self, ReqReject> {
        let r = Request::parse_verified(buf, k_seq)?;
        let msgs = r.msgs().collect::<Result<Vec<_>, _>>()?;
        Ok(RequestPacket {
            book: r.book(),
            resend: r.resend(),
            session: r.session(),
            pkt_seq: r.pkt_seq(),
            msgs,
        })
    }
}

// ---------------------------------------------------------------------------------------------

/// Codes of the `Reject` record (this project; 07 §6.8, §8.5, §9.5 and 01 §14.1 name some).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u16)]
pub enum RejectCode {
    /// `BAD_SEQ`: pkt_seq above `last(session) + 1`, or 0; detail = the pkt_seq expected (07 §9.5).
    BadSeq = 1,
    /// `BAD_TAG`: `tag_seq` did not verify; detail 0.
    BadTag = 2,
    /// `BAD_MSG`: a malformed packet or message; detail = the [`ReqReject`] number.
    BadMsg = 3,
    /// `RISK_QTY`: qty above the account's max order qty; detail = the limit.
    RiskQty = 4,
    /// `RISK_OPEN`: the account's open-order limit; detail = the limit.
    RiskOpen = 5,
    /// `RISK_EXPOSURE`: the account's exposure limit; detail = the limit.
    RiskExposure = 6,
    /// `UNKNOWN_ORDER`: a Cancel naming no live order; detail = its client_tag.
    UnknownOrder = 7,
    /// `BOOK_HALTED`: the book is halted (07 §6.8); detail = the halting Control step.
    BookHalted = 8,
    /// `RESEND_GONE`: neither the hot ring nor the recovery service holds the response
    /// (07 §8.5); detail = the oldest pkt_seq still resendable, 0 if none.
    ResendGone = 9,
    /// `BUSY`: shed by deadline admission (01 §14.1, 07 §3.6/§3.8 Shed); detail 0.
    Busy = 10,
    /// `DUPLICATE_TAG`: a New whose client_tag names a live order; detail = the tag.
    DuplicateTag = 11,
    /// `BAD_BOOK`: the packet's book is not served here; detail = the book.
    BadBook = 12,
    /// `BOOK_FULL`: the book holds its most resting orders, so a GTC remainder could not rest
    /// (what traded stands; an `Out` record carries the remainder); detail 0.
    BookFull = 13,
    /// `EXCLUDED`: a failover's seal listed the packet unavailable (07 §9.3, §9.4): no box held
    /// its payload, so the final log never executed its messages; whatever the dead tenure
    /// answered for it was reverted (§9.6 case d). Detail 0. A promoted sequencer answers a
    /// resend of such a packet with it.
    Excluded = 14,
}

impl RejectCode {
    /// From the wire value.
    pub fn from_u16(v: u16) -> Option<Self> {
        use RejectCode::*;
        Some(match v {
            1 => BadSeq,
            2 => BadTag,
            3 => BadMsg,
            4 => RiskQty,
            5 => RiskOpen,
            6 => RiskExposure,
            7 => UnknownOrder,
            8 => BookHalted,
            9 => ResendGone,
            10 => Busy,
            11 => DuplicateTag,
            12 => BadBook,
            13 => BookFull,
            14 => Excluded,
            _ => return None,
        })
    }

    /// The code's name, e.g. `BAD_SEQ`.
    pub fn name(self) -> &'static str {
        use RejectCode::*;
        match self {
            BadSeq => "BAD_SEQ",
            BadTag => "BAD_TAG",
            BadMsg => "BAD_MSG",
            RiskQty => "RISK_QTY",
            RiskOpen => "RISK_OPEN",
            RiskExposure => "RISK_EXPOSURE",
            UnknownOrder => "UNKNOWN_ORDER",
            BookHalted => "BOOK_HALTED",
            ResendGone => "RESEND_GONE",
            Busy => "BUSY",
            DuplicateTag => "DUPLICATE_TAG",
            BadBook => "BAD_BOOK",
            BookFull => "BOOK_FULL",
            Excluded => "EXCLUDED",
        }
    }
}

/// Response record type bytes.
pub mod rec {
    /// [`Record::Ack`](super::Record::Ack).
    pub const ACK: u8 = 1;
    /// [`Record::Reject`](super::Record::Reject).
    pub const REJECT: u8 = 2;
    /// [`Record::Fill`](super::Record::Fill).
    pub const FILL: u8 = 3;
    /// [`Record::CancelAck`](super::Record::CancelAck).
    pub const CANCEL_ACK: u8 = 4;
    /// [`Record::Out`](super::Record::Out).
    pub const OUT: u8 = 5;
    /// [`Record::Busy`](super::Record::Busy).
    pub const BUSY: u8 = 6;
    /// [`Record::Halted`](super::Record::Halted).
    pub const HALTED: u8 = 7;
    /// [`Record::Durable`](super::Record::Durable).
    pub const DURABLE: u8 = 8;
    /// [`Record::Final`](super::Record::Final).
    pub const FINAL: u8 = 9;
    /// [`Record::SeqChange`](super::Record::SeqChange).
    pub const SEQ_CHANGE: u8 = 10;
    /// [`Record::DataRedirect`](super::Record::DataRedirect).
    pub const DATA_REDIRECT: u8 = 11;
    /// [`Record::TenureEnd`](super::Record::TenureEnd).
    pub const TENURE_END: u8 = 12;
}

/// One 32-byte response record (missing-chapters §2; layouts in `docs/wire-messages.md`).
/// `msg_index` names the message of the echoed request packet (0..=9) or is
/// [`MSG_INDEX_NONE`]; every byte not listed is zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Record {
    /// The message was accepted (a New rested or is working).
    Ack {
        /// Message index, 0..=9.
        msg_index: u8,
        /// The order's client_tag.
        client_tag: u32,
    },
    /// The message (index 0..=9) or the whole packet ([`MSG_INDEX_NONE`]) was refused.
    Reject {
        /// Message index, 0..=9, or 0xFF.
        msg_index: u8,
        /// Why.
        code: RejectCode,
        /// Code-specific detail (see [`RejectCode`]).
        detail: u64,
        /// The message's client_tag (0 for a packet-level reject).
        client_tag: u32,
    },
    /// A trade of the order placed by message `msg_index` of the echoed packet.
    Fill {
        /// Message index, 0..=9.
        msg_index: u8,
        /// Trade price, ticks.
        price: i32,
        /// Traded quantity.
        qty: u32,
        /// Quantity still open after this fill.
        leaves: u32,
        /// StepId of the trade (07 §6.9: durable and final watermarks are in steps/heights).
        step: u64,
        /// The order's client_tag.
        client_tag: u32,
    },
    /// The Cancel at `msg_index` removed its order.
    CancelAck {
        /// Message index, 0..=9.
        msg_index: u8,
        /// The cancelled order's client_tag.
        client_tag: u32,
    },
    /// The unfilled remainder of an IOC was cancelled.
    Out {
        /// Message index, 0..=9.
        msg_index: u8,
        /// Quantity cancelled.
        qty: u32,
        /// The order's client_tag.
        client_tag: u32,
    },
    /// The whole packet was shed by deadline admission (SHED, 07 §3.6); `msg_index` 0xFF.
    Busy,
    /// Unsolicited: the book halted (07 §6.8); `msg_index` 0xFF.
    Halted,
    /// Unsolicited `DUR_QUORUM` watermark (07 §6.9): steps ≤ `step` are held by Q voters.
    Durable {
        /// Durable StepId.
        step: u64,
        /// Its height.
        height: u64,
    },
    /// Unsolicited `FINAL` watermark (07 §6.9): heights ≤ `height` are final.
    Final {
        /// Final height.
        height: u64,
        /// Simplex view of the finalization.
        view: u64,
    },
    /// Unsolicited: the sequencer changed (07 §9.5); `new_seq` 0xFF = none (addr zero).
    SeqChange {
        /// Epoch.
        epoch: u32,
        /// New tenure.
        tenure: u8,
        /// New sequencer index, or 0xFF.
        new_seq: u8,
        /// Its client address.
        addr: Addr18,
    },
    /// Unsolicited: resend copy 2 from `resend_from` to data box `to` (07 §5.7).
    DataRedirect {
        /// Failed data home.
        from: u8,
        /// New data home.
        to: u8,
        /// First pkt_seq to resend.
        resend_from: u32,
    },
    /// Unsolicited, beside `SeqChange`: tenure `tenure` ended in a final seal (07 §9.4) whose
    /// block is `height` and ends at step `last_step`. Every fill of that tenure at a step
    /// ≤ `last_step` is durable and final (the seal's certificate); every one above it was
    /// reverted (07 §9.6): it is in no final log.
    TenureEnd {
        /// Epoch.
        epoch: u32,
        /// The tenure that ended.
        tenure: u8,
        /// The seal block's height.
        height: u64,
        /// The seal block's last step.
        last_step: u64,
    },
}

impl Record {
    /// The type byte.
    pub fn rec_type(&self) -> u8 {
        match self {
            Record::Ack { .. } => rec::ACK,
            Record::Reject { .. } => rec::REJECT,
            Record::Fill { .. } => rec::FILL,
            Record::CancelAck { .. } => rec::CANCEL_ACK,
            Record::Out { .. } => rec::OUT,
            Record::Busy => rec::BUSY,
            Record::Halted => rec::HALTED,
            Record::Durable { .. } => rec::DURABLE,
            Record::Final { .. } => rec::FINAL,
            Record::SeqChange { .. } => rec::SEQ_CHANGE,
            Record::DataRedirect { .. } => rec::DATA_REDIRECT,
            Record::TenureEnd { .. } => rec::TENURE_END,
        }
    }

    /// `msg_index` as written.
    pub fn msg_index(&self) -> u8 {
        match *self {
            Record::Ack { msg_index, .. }
            | Record::Reject { msg_index, .. }
            | Record::Fill { msg_index, .. }
            | Record::CancelAck { msg_index, .. }
            | Record::Out { msg_index, .. } => msg_index,
            _ => MSG_INDEX_NONE,
        }
    }

    /// Unsolicited records (watermarks, notices) answer no request.
    pub fn is_unsolicited(&self) -> bool {
        matches!(
            self,
            Record::Halted
                | Record::Durable { .. }
                | Record::Final { .. }
                | Record::SeqChange { .. }
                | Record::DataRedirect { .. }
                | Record::TenureEnd { .. }
        )
    }

    fn check(&self) -> Result<(), Malformed> {
        let i = self.msg_index();
        let ok = match self {
            Record::Reject { .. } => (i as usize) < MAX_MSGS_PER_PKT || i == MSG_INDEX_NONE,
            Record::Ack { .. }
            | Record::Fill { .. }
            | Record::CancelAck { .. }
            | Record::Out { .. } => (i as usize) < MAX_MSGS_PER_PKT,
            _ => true,
        };
        if !ok {
            return Err(Malformed::BadValue);
        }
        if let Record::SeqChange {
            new_seq: NEXT_SEQ_NONE,
            addr,
            ..
        } = self
        {
            if *addr != [0u8; 18] {
                return Err(Malformed::Reserved);
            }
        }
        Ok(())
    }

    /// The 32 wire bytes; fails where `parse` would (a `msg_index` out of range, an address
    /// with `new_seq` none).
    pub fn to_bytes(&self) -> Result<[u8; RESP_RECORD_BYTES], Malformed> {
        let mut b = [0u8; RESP_RECORD_BYTES];
        self.write_to(&mut b)?;
        Ok(b)
    }

    /// [`Record::to_bytes`] written in place into `b` (every byte of it: zero where the record
    /// has no field): a response builder writes its records where they go, with no 32-byte
    /// value to copy (that copy read back narrower stores, ~5 % of the replay tile, perf). On
    /// an error `b` is left as it was.
    #[inline]
    pub fn write_to(&self, b: &mut [u8; RESP_RECORD_BYTES]) -> Result<(), Malformed> {
        self.check()?;
        b.fill(0);
        b[0] = self.rec_type();
        b[1] = self.msg_index();
        fn put(b: &mut [u8], off: usize, v: &[u8]) {
            b[off..off + v.len()].copy_from_slice(v);
        }
        match *self {
            Record::Ack { client_tag, .. } | Record::CancelAck { client_tag, .. } => {
                put(b, 4, &client_tag.to_le_bytes());
            }
            Record::Reject {
                code,
                detail,
                client_tag,
                ..
            } => {
                put(b, 4, &(code as u16).to_le_bytes());
                put(b, 8, &detail.to_le_bytes());
                put(b, 16, &client_tag.to_le_bytes());
            }
            Record::Fill {
                price,
                qty,
                leaves,
                step,
                client_tag,
                ..
            } => {
                put(b, 4, &price.to_le_bytes());
                put(b, 8, &qty.to_le_bytes());
                put(b, 12, &leaves.to_le_bytes());
                put(b, 16, &step.to_le_bytes());
                put(b, 24, &client_tag.to_le_bytes());
            }
            Record::Out {
                qty, client_tag, ..
            } => {
                put(b, 4, &client_tag.to_le_bytes());
                put(b, 8, &qty.to_le_bytes());
            }
            Record::Busy | Record::Halted => {}
            Record::Durable { step, height } => {
                put(b, 8, &step.to_le_bytes());
                put(b, 16, &height.to_le_bytes());
            }
            Record::Final { height, view } => {
                put(b, 8, &height.to_le_bytes());
                put(b, 16, &view.to_le_bytes());
            }
            Record::SeqChange {
                epoch,
                tenure,
                new_seq,
                addr,
            } => {
                put(b, 4, &epoch.to_le_bytes());
                b[8] = tenure;
                b[9] = new_seq;
                put(b, 10, &addr);
            }
            Record::DataRedirect {
                from,
                to,
                resend_from,
            } => {
                b[4] = from;
                b[5] = to;
                put(b, 8, &resend_from.to_le_bytes());
            }
            Record::TenureEnd {
                epoch,
                tenure,
                height,
                last_step,
            } => {
                put(b, 4, &epoch.to_le_bytes());
                b[8] = tenure;
                put(b, 16, &height.to_le_bytes());
                put(b, 24, &last_step.to_le_bytes());
            }
        }
        Ok(())
    }

    /// Parse exactly 32 bytes: known type, `msg_index` allowed for the type, known reject
    /// code, and every byte the type does not use zero (checked by re-encoding).
    pub fn parse(b: &[u8]) -> Result<Self, Malformed> {
        let b: &[u8; RESP_RECORD_BYTES] = b.try_into().map_err(|_| Malformed::BadLength)?;
        let u32_at = |o: usize| u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        let u64_at = |o: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[o..o + 8]);
            u64::from_le_bytes(a)
        };
        let msg_index = b[1];
        let unsolicited_index = |r: Record| {
            if msg_index == MSG_INDEX_NONE {
                Ok(r)
            } else {
                Err(Malformed::BadValue)
            }
        };
        let r = match b[0] {
            rec::ACK => Record::Ack {
                msg_index,
                client_tag: u32_at(4),
            },
            rec::REJECT => Record::Reject {
                msg_index,
                code: RejectCode::from_u16(u16::from_le_bytes([b[4], b[5]]))
                    .ok_or(Malformed::BadValue)?,
                detail: u64_at(8),
                client_tag: u32_at(16),
            },
            rec::FILL => Record::Fill {
                msg_index,
                price: u32_at(4) as i32,
                qty: u32_at(8),
                leaves: u32_at(12),
                step: u64_at(16),
                client_tag: u32_at(24),
            },
            rec::CANCEL_ACK => Record::CancelAck {
                msg_index,
                client_tag: u32_at(4),
            },
            rec::OUT => Record::Out {
                msg_index,
                client_tag: u32_at(4),
                qty: u32_at(8),
            },
            rec::BUSY => unsolicited_index(Record::Busy)?,
            rec::HALTED => unsolicited_index(Record::Halted)?,
            rec::DURABLE => unsolicited_index(Record::Durable {
                step: u64_at(8),
                height: u64_at(16),
            })?,
            rec::FINAL => unsolicited_index(Record::Final {
                height: u64_at(8),
                view: u64_at(16),
            })?,
            rec::SEQ_CHANGE => {
                let mut addr = [0u8; 18];
                addr.copy_from_slice(&b[10..28]);
                unsolicited_index(Record::SeqChange {
                    epoch: u32_at(4),
                    tenure: b[8],
                    new_seq: b[9],
                    addr,
                })?
            }
            rec::DATA_REDIRECT => unsolicited_index(Record::DataRedirect {
                from: b[4],
                to: b[5],
                resend_from: u32_at(8),
            })?,
            rec::TENURE_END => unsolicited_index(Record::TenureEnd {
                epoch: u32_at(4),
                tenure: b[8],
                height: u64_at(16),
                last_step: u64_at(24),
            })?,
            _ => return Err(Malformed::BadKind),
        };
        if r.to_bytes()? != *b {
            return Err(Malformed::Reserved);
        }
        Ok(r)
    }
}

/// A response packet (this project's design, missing-chapters §2), tagged under `K_out`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Response {
    /// Session.
    pub session: u32,
    /// pkt_seq of the request this answers; 0 when every record is unsolicited.
    pub echo_pkt_seq: u32,
    /// Per session, from 1, +1 per response packet (gapless; a resend reuses the original's).
    pub resp_seq: u64,
    /// `flags.resend`: rebuilt from the hot ring or the recovery service (07 §8.5).
    pub resend: bool,
    /// 1..=40 records.
    pub records: Vec<Record>,
}

impl Response {
    /// Packet length for `n` records: `40 + 32·n`.
    pub const fn len_for(n: usize) -> usize {
        RESP_HDR_BYTES + RESP_RECORD_BYTES * n + RESP_TAG_BYTES
    }

    fn check(&self) -> Result<(), Malformed> {
        if self.records.len() > RESP_MAX_RECORDS {
            return Err(Malformed::TooMany);
        }
        if self.records.is_empty() || self.resp_seq == 0 {
            return Err(Malformed::BadValue);
        }
        if self.echo_pkt_seq == 0 && !self.records.iter().all(Record::is_unsolicited) {
            return Err(Malformed::BadValue);
        }
        Ok(())
    }

    /// Append the packet with its tag under `k_out`; fails, writing nothing, where `parse` would.
    pub fn encode(&self, k_out: &SipKey, out: &mut Vec<u8>) -> Result<(), Malformed> {
        self.check()?;
        let recs = self
            .records
            .iter()
            .map(Record::to_bytes)
            .collect::<Result<Vec<_>, _>>()?;
        let start = out.len();
        out.extend_from_slice(&self.session.to_le_bytes());
        out.extend_from_slice(&self.echo_pkt_seq.to_le_bytes());
        out.extend_from_slice(&self.resp_seq.to_le_bytes());
        out.push(self.records.len() as u8);
        out.push(if self.resend { RESP_FLAG_RESEND } else { 0 });
        out.extend_from_slice(&[0u8; 6]);
        for r in &recs {
            out.extend_from_slice(r);
        }
        let tag = siphash128(k_out, &out[start..]);
        out.extend_from_slice(&tag);
        Ok(())
    }

    /// The packet bytes.
    pub fn to_bytes(&self, k_out: &SipKey) -> Result<Vec<u8>, Malformed> {
        let mut v = Vec::with_capacity(Self::len_for(self.records.len()));
        self.encode(k_out, &mut v)?;
        Ok(v)
    }

    /// Parse a whole packet and verify its tag (`BadTag`) under `k_out`.
    pub fn parse(buf: &[u8], k_out: &SipKey) -> Result<Self, Malformed> {
        let mut r = Reader::new(buf);
        let session = r.u32_le()?;
        let echo_pkt_seq = r.u32_le()?;
        let resp_seq = r.u64_le()?;
        let count = r.u8()? as usize;
        let flags = r.u8()?;
        if r.bytes(6)?.iter().any(|&x| x != 0) || flags & !RESP_FLAG_RESEND != 0 {
            return Err(Malformed::Reserved);
        }
        if count > RESP_MAX_RECORDS {
            return Err(Malformed::TooMany);
        }
        if buf.len() != Self::len_for(count) {
            return Err(if buf.len() < Self::len_for(count) {
                Malformed::Truncated
            } else {
                Malformed::BadLength
            });
        }
        let signed = &buf[..buf.len() - RESP_TAG_BYTES];
        let mut tag = [0u8; 16];
        tag.copy_from_slice(&buf[buf.len() - RESP_TAG_BYTES..]);
        if !ct_eq16(&siphash128(k_out, signed), &tag) {
            return Err(Malformed::BadTag);
        }
        let mut records = Vec::with_capacity(count);
        for _ in 0..count {
            records.push(Record::parse(r.bytes(RESP_RECORD_BYTES)?)?);
        }
        let p = Response {
            session,
            echo_pkt_seq,
            resp_seq,
            resend: flags != 0,
            records,
        };
        p.check()?;
        Ok(p)
    }
}
