//! Request packets built in place and response packets read in place (missing-chapters §2,
//! layouts in `docs/wire-messages.md` §5): no allocation on either path.
//!
//! [`build_request`] writes exactly the bytes `vyrn_wire::msg::client::RequestPacket::encode`
//! writes (a test checks it), into a caller buffer. [`ResponseView::parse`] accepts exactly
//! what `Response::parse` accepts (a property test checks it), verifying the tag under
//! `K_out` before it reads any record, and hands the records out of a fixed array.

use vyrn_wire::consts::MAX_MSGS_PER_PKT;
use vyrn_wire::msg::client::{
    req_len, siphash128, Msg, Record, SipKey, REQ_FLAG_RESEND, REQ_HDR_BYTES, REQ_MAX_LEN,
    REQ_MSG_BYTES, REQ_TAG_BYTES, RESP_FLAG_RESEND, RESP_HDR_BYTES, RESP_MAX_RECORDS,
    RESP_RECORD_BYTES, RESP_TAG_BYTES,
};

/// Why a received response packet was dropped. Each has its own counter
/// ([`crate::Counters`]); none panics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// Shorter than its header, or not `40 + 32·count` bytes long.
    Truncated,
    /// `tag_out` does not verify under `K_out`.
    BadTag,
    /// The tag verifies but the session is not ours.
    WrongSession,
    /// A record type this client does not know.
    UnknownType,
    /// Any other rule of the layout: reserved bytes, count 0 or above 40, `resp_seq` 0, a
    /// `msg_index` out of range, an unsolicited packet with a solicited record.
    Malformed,
}

/// Bytes of the longest request packet (ten messages).
pub const REQ_BUF: usize = REQ_MAX_LEN;

/// Write a request packet for `msgs` into `out` and tag it under `k_seq`; returns its length.
///
/// `msgs` must hold 1..=10 valid messages and `pkt_seq` must be ≥ 1 (the caller, the session,
/// checks both first; a violation is a programmer error and panics).
pub fn build_request(
    out: &mut [u8; REQ_BUF],
    k_seq: &SipKey,
    book: u16,
    session: u32,
    pkt_seq: u32,
    resend: bool,
    msgs: &[Msg],
) -> usize {
    assert!(
        (1..=MAX_MSGS_PER_PKT).contains(&msgs.len()),
        "1..=10 messages"
    );
    assert!(pkt_seq >= 1, "pkt_seq starts at 1");
    let n = msgs.len();
    out[0..2].copy_from_slice(&book.to_le_bytes());
    out[2] = n as u8;
    out[3] = if resend { REQ_FLAG_RESEND } else { 0 };
    out[4..8].copy_from_slice(&session.to_le_bytes());
    out[8..12].copy_from_slice(&pkt_seq.to_le_bytes());
    out[12..16].fill(0);
    for (i, m) in msgs.iter().enumerate() {
        let off = REQ_HDR_BYTES + REQ_MSG_BYTES * i;
        out[off..off + REQ_MSG_BYTES].copy_from_slice(&m.to_bytes());
    }
    let len = req_len(n);
    let signed = len - REQ_TAG_BYTES;
    let tag = siphash128(k_seq, &out[..signed]);
    out[signed..len].copy_from_slice(&tag);
    len
}

/// Turn a retained request packet into its resend form in place: `flags.resend` set and the
/// tag recomputed (the tag covers the flags byte; the full hash does not, so the data box
/// dedupes the resend as a repeat, 07 §5.2).
pub fn mark_resend(pkt: &mut [u8], k_seq: &SipKey) {
    debug_assert!(pkt.len() >= REQ_HDR_BYTES + REQ_MSG_BYTES + REQ_TAG_BYTES);
    pkt[3] |= REQ_FLAG_RESEND;
    let signed = pkt.len() - REQ_TAG_BYTES;
    let tag = siphash128(k_seq, &pkt[..signed]);
    pkt[signed..].copy_from_slice(&tag);
}

fn ct_eq16(a: &[u8], b: &[u8]) -> bool {
    debug_assert_eq!(a.len(), 16);
    let mut d = 0u8;
    for (x, y) in a.iter().zip(b) {
        d |= x ^ y;
    }
    d == 0 && a.len() == b.len()
}

fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]])
}

fn u64_at(b: &[u8], o: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[o..o + 8]);
    u64::from_le_bytes(a)
}

/// A response packet whose tag verified and whose records parsed, held in a fixed array.
#[derive(Debug, Clone, Copy)]
pub struct ResponseView {
    /// Session.
    pub session: u32,
    /// The request packet answered; 0 when every record is unsolicited.
    pub echo_pkt_seq: u32,
    /// The session's response number (a resend reuses the original's).
    pub resp_seq: u64,
    /// `flags.resend` (07 §8.5, §9.5).
    pub resend: bool,
    count: u8,
    records: [Record; RESP_MAX_RECORDS],
}

impl ResponseView {
    /// The records, in packet order.
    pub fn records(&self) -> &[Record] {
        &self.records[..self.count as usize]
    }

    /// Check the layout, verify `tag_out` under `k_out` (constant time) before reading any
    /// record, then parse every record. `session` is the session this client runs: a packet
    /// for another session is [`DropReason::WrongSession`] (checked after the tag, so a forger
    /// cannot probe sessions).
    pub fn parse(buf: &[u8], k_out: &SipKey, session: u32) -> Result<Self, DropReason> {
        if buf.len() < RESP_HDR_BYTES {
            return Err(DropReason::Truncated);
        }
        let count = buf[16] as usize;
        let flags = buf[17];
        if buf[18..24].iter().any(|&x| x != 0) || flags & !RESP_FLAG_RESEND != 0 {
            return Err(DropReason::Malformed);
        }
        if count > RESP_MAX_RECORDS {
            return Err(DropReason::Malformed);
        }
        let len = RESP_HDR_BYTES + RESP_RECORD_BYTES * count + RESP_TAG_BYTES;
        if buf.len() != len {
            return Err(if buf.len() < len {
                DropReason::Truncated
            } else {
                DropReason::Malformed
            });
        }
        let signed = len - RESP_TAG_BYTES;
        if !ct_eq16(&siphash128(k_out, &buf[..signed]), &buf[signed..]) {
            return Err(DropReason::BadTag);
        }
        let mut v = ResponseView {
            session: u32_at(buf, 0),
            echo_pkt_seq: u32_at(buf, 4),
            resp_seq: u64_at(buf, 8),
            resend: flags & RESP_FLAG_RESEND != 0,
            count: count as u8,
            records: [Record::Busy; RESP_MAX_RECORDS],
        };
        for i in 0..count {
            let off = RESP_HDR_BYTES + RESP_RECORD_BYTES * i;
            let b = &buf[off..off + RESP_RECORD_BYTES];
            v.records[i] = Record::parse(b).map_err(|e| match e {
                vyrn_wire::error::Malformed::BadKind => DropReason::UnknownType,
                _ => DropReason::Malformed,
            })?;
        }
        if count == 0 || v.resp_seq == 0 {
            return Err(DropReason::Malformed);
        }
        if v.echo_pkt_seq == 0 && !v.records().iter().all(Record::is_unsolicited) {
            return Err(DropReason::Malformed);
        }
        if v.session != session {
            return Err(DropReason::WrongSession);
        }
        Ok(v)
    }

    /// True for a notice: every record is a data-tier notice (`SeqChange`, `TenureEnd`,
    /// `DataRedirect`), or
    /// the packet carries `NOTICE_RESP_SEQ` and only unsolicited records (control's `Durable`,
    /// `Final`, `Halted` watermarks). Senders of notices cannot know, or do not take, the
    /// session's `resp_seq`, so the client leaves them out of `resp_seq` accounting (a reading
    /// of ours; 04 owns it).
    pub fn is_notice(&self) -> bool {
        let all = |f: fn(&Record) -> bool| self.records().iter().all(f);
        all(|r| {
            matches!(
                r,
                Record::SeqChange { .. } | Record::DataRedirect { .. } | Record::TenureEnd { .. }
            )
        }) || (self.resp_seq == vyrn_wire::msg::client::NOTICE_RESP_SEQ
            && all(|r| r.is_unsolicited()))
    }
}

/// Largest message count, re-exported for sizing caller arrays.
pub const MAX_MSGS: usize = MAX_MSGS_PER_PKT;

#[cfg(test)]
mod tests {
    use super::*;
    use vyrn_wire::msg::client::{MsgType, RequestPacket, Response, Side};

    #[test]
    fn build_matches_wire_encoder() {
        let k = [7u8; 16];
        let msgs = [
            Msg {
                kind: MsgType::NewGtc,
                side: Side::Sell,
                tick: -5,
                qty: 9,
                client_tag: 3,
            },
            Msg {
                kind: MsgType::Cancel,
                side: Side::Buy,
                tick: 0,
                qty: 0,
                client_tag: 2,
            },
        ];
        for resend in [false, true] {
            let mut buf = [0u8; REQ_BUF];
            let n = build_request(&mut buf, &k, 7, 0x1001, 42, resend, &msgs);
            let want = RequestPacket {
                book: 7,
                resend,
                session: 0x1001,
                pkt_seq: 42,
                msgs: msgs.to_vec(),
            }
            .to_bytes(&k)
            .unwrap();
            assert_eq!(&buf[..n], &want[..]);
        }
        let mut buf = [0u8; REQ_BUF];
        let n = build_request(&mut buf, &k, 7, 0x1001, 42, false, &msgs);
        mark_resend(&mut buf[..n], &k);
        let p = RequestPacket::parse(&buf[..n], &k).unwrap();
        assert!(p.resend);
    }

    #[test]
    fn parse_agrees_on_a_golden_response() {
        let k: SipKey = core::array::from_fn(|i| 0x10 + i as u8);
        let r = Response {
            session: 0x1001,
            echo_pkt_seq: 1,
            resp_seq: 1,
            resend: false,
            records: vec![Record::Ack {
                msg_index: 0,
                client_tag: 42,
            }],
        };
        let b = r.to_bytes(&k).unwrap();
        let v = ResponseView::parse(&b, &k, 0x1001).unwrap();
        assert_eq!(v.records(), &r.records[..]);
        assert_eq!(
            ResponseView::parse(&b, &k, 0x1002).unwrap_err(),
            DropReason::WrongSession
        );
        assert_eq!(
            ResponseView::parse(&b, &[0; 16], 0x1001).unwrap_err(),
            DropReason::BadTag
        );
        assert_eq!(
            ResponseView::parse(&b[..b.len() - 1], &k, 0x1001).unwrap_err(),
            DropReason::Truncated
        );
    }
}
