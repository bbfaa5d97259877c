//! REP_RspEntry (07 §8.5): a response packet kept by the recovery service in a few bytes, so a
//! resend older than the sequencer's hot ring is rebuilt exactly from the entry alone — no
//! lookup of the request, no stored tag (the tag is recomputed under `K_out` when it is sent,
//! with `flags.resend`).
//!
//! 07 gives the shape (`echo_pkt` delta, count, then each record with every field kept and
//! delta-coded per session: tick, handle and `client_tag` against the session's previous
//! values, qty as LEB128; ~5.5 B per record, ~53 B per packet at the peak mix); the bytes are a
//! decision of this project, in `docs/wire-messages.md` ("REP_RspEntry") with a golden vector:
//!
//! ```text
//! entry  := echo_delta zz   count u8 (1..=40)   count × record
//! record := head u8 (type in bits 0..4, msg_index in bits 4..8: 0..=9, 15 = 0xFF), then by type
//!   Ack, CancelAck     tag_delta zz
//!   Reject             code leb, detail leb, tag_delta zz
//!   Fill               price_delta zz, qty leb, leaves leb, step_delta zz, tag_delta zz
//!   Out                tag_delta zz, qty leb
//!   Busy, Halted       —
//!   Durable            step_delta zz, height leb
//!   Final              height leb, view leb
//!   SeqChange          epoch leb, tenure u8, new_seq u8, addr 18 bytes
//!   DataRedirect       from u8, to u8, resend_from leb
//!   TenureEnd          epoch leb, tenure u8, height leb, last_step leb
//! ```
//!
//! `zz` is a ZigZag LEB128 of the wrapping difference from the session's previous value
//! ([`EntryState`]: `echo_pkt_seq`, `client_tag`, price, step), each then set to the new value;
//! `leb` is LEB128. `resp_seq` is not stored: entries of a session are consecutive, and the
//! store keeps the first `resp_seq` of each page. The state starts at zero where a page starts,
//! so a page decodes on its own.
//!
//! Hot path (the recovery service's replay sink): no allocation — [`encode`] writes into a
//! caller's buffer, [`decode`] rebuilds into a fixed one.

use crate::error::Malformed;
use crate::leb::{put_u64, unzigzag, zigzag, Reader};
use crate::msg::client::{
    rec, Record, RejectCode, MSG_INDEX_NONE, RESP_FLAG_RESEND, RESP_HDR_BYTES, RESP_MAX_RECORDS,
    RESP_RECORD_BYTES, RESP_TAG_BYTES,
};

/// Longest entry: 40 records of the longest kind (a Fill: head, four LEB128s of 32-bit values
/// and a step delta of up to 10 bytes) after a 5-byte echo delta and the count.
pub const RSP_ENTRY_MAX: usize = 5 + 1 + RESP_MAX_RECORDS * RSP_RECORD_MAX;

/// Longest record in an entry (a Fill: 1 + 5 + 5 + 5 + 10 + 5).
pub const RSP_RECORD_MAX: usize = 31;

/// Longest packet an entry rebuilds (header, 40 records, the tag's 16 bytes, zero here).
pub const RSP_PACKET_MAX: usize =
    RESP_HDR_BYTES + RESP_RECORD_BYTES * RESP_MAX_RECORDS + RESP_TAG_BYTES;

/// The session's previous values the entries are delta-coded against (07 §8.5); zero where a
/// page starts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EntryState {
    /// The previous entry's `echo_pkt_seq`.
    pub echo: u32,
    /// The previous record's `client_tag`.
    pub tag: u32,
    /// The previous Fill's price, ticks.
    pub price: i32,
    /// The previous Fill's or Durable's step.
    pub step: u64,
}

/// Msg index 0xFF as the head's high nibble.
const NIBBLE_NONE: u8 = 15;

fn zz32(new: u32, prev: u32) -> u64 {
    zigzag(new.wrapping_sub(prev) as i32 as i64)
}

/// Encode the response packet `pkt` (header, records, tag: the tag and `flags` are not kept)
/// as an entry into `out` (at least [`RSP_ENTRY_MAX`] bytes), advancing `st`. Returns its
/// length. Every record must parse (a record with a reserved byte set could not be rebuilt
/// exactly); on an error `st` is left as it was.
pub fn encode(st: &mut EntryState, pkt: &[u8], out: &mut [u8]) -> Result<usize, Malformed> {
    if out.len() < RSP_ENTRY_MAX {
        return Err(Malformed::Truncated);
    }
    let mut r = Reader::new(pkt);
    let _session = r.u32_le()?;
    let echo = r.u32_le()?;
    let _resp_seq = r.u64_le()?;
    let count = r.u8()? as usize;
    if count == 0 || count > RESP_MAX_RECORDS {
        return Err(Malformed::TooMany);
    }
    if pkt.len() != RESP_HDR_BYTES + RESP_RECORD_BYTES * count + RESP_TAG_BYTES {
        return Err(Malformed::BadLength);
    }
    let mut s = *st;
    let mut at = 0usize;
    put_u64(out, &mut at, zz32(echo, s.echo));
    s.echo = echo;
    out[at] = count as u8;
    at += 1;
    for i in 0..count {
        let o = RESP_HDR_BYTES + RESP_RECORD_BYTES * i;
        let rec = Record::parse(&pkt[o..o + RESP_RECORD_BYTES])?;
        put_record(&mut s, &rec, out, &mut at);
    }
    *st = s;
    Ok(at)
}

fn put_record(s: &mut EntryState, rec: &Record, out: &mut [u8], at: &mut usize) {
    let mi = match rec.msg_index() {
        MSG_INDEX_NONE => NIBBLE_NONE,
        i => i,
    };
    out[*at] = rec.rec_type() | (mi << 4);
    *at += 1;
    fn tag(s: &mut EntryState, t: u32, out: &mut [u8], at: &mut usize) {
        put_u64(out, at, zz32(t, s.tag));
        s.tag = t;
    }
    match *rec {
        Record::Ack { client_tag, .. } | Record::CancelAck { client_tag, .. } => {
            tag(s, client_tag, out, at)
        }
        Record::Reject {
            code,
            detail,
            client_tag,
            ..
        } => {
            put_u64(out, at, code as u64);
            put_u64(out, at, detail);
            tag(s, client_tag, out, at);
        }
        Record::Fill {
            price,
            qty,
            leaves,
            step,
            client_tag,
            ..
        } => {
            put_u64(out, at, zz32(price as u32, s.price as u32));
            s.price = price;
            put_u64(out, at, qty as u64);
            put_u64(out, at, leaves as u64);
            put_u64(out, at, zigzag(step.wrapping_sub(s.step) as i64));
            s.step = step;
            tag(s, client_tag, out, at);
        }
        Record::Out {
            qty, client_tag, ..
        } => {
            tag(s, client_tag, out, at);
            put_u64(out, at, qty as u64);
        }
        Record::Busy | Record::Halted => {}
        Record::Durable { step, height } => {
            put_u64(out, at, zigzag(step.wrapping_sub(s.step) as i64));
            s.step = step;
            put_u64(out, at, height);
        }
        Record::Final { height, view } => {
            put_u64(out, at, height);
            put_u64(out, at, view);
        }
        Record::SeqChange {
            epoch,
            tenure,
            new_seq,
            addr,
        } => {
            put_u64(out, at, epoch as u64);
            out[*at] = tenure;
            out[*at + 1] = new_seq;
            out[*at + 2..*at + 20].copy_from_slice(&addr);
            *at += 20;
        }
        Record::DataRedirect {
            from,
            to,
            resend_from,
        } => {
            out[*at] = from;
            out[*at + 1] = to;
            *at += 2;
            put_u64(out, at, resend_from as u64);
        }
        Record::TenureEnd {
            epoch,
            tenure,
            height,
            last_step,
        } => {
            put_u64(out, at, epoch as u64);
            out[*at] = tenure;
            *at += 1;
            put_u64(out, at, height);
            put_u64(out, at, last_step);
        }
    }
}

/// Rebuild the packet of the next entry in `r` (session `session`, number `resp_seq`) into
/// `out` with `flags.resend` set and its 16 tag bytes zero (the sender tags it under `K_out`),
/// advancing `st`. Returns the packet's length. A malformed entry is an error and leaves `st`
/// as it was.
pub fn decode(
    st: &mut EntryState,
    r: &mut Reader<'_>,
    session: u32,
    resp_seq: u64,
    out: &mut [u8; RSP_PACKET_MAX],
) -> Result<usize, Malformed> {
    let mut s = *st;
    let echo = s.echo.wrapping_add(unzigzag(r.leb_u64()?) as u32);
    s.echo = echo;
    let count = r.u8()? as usize;
    if count == 0 || count > RESP_MAX_RECORDS {
        return Err(Malformed::TooMany);
    }
    out[..RESP_HDR_BYTES].fill(0);
    out[0..4].copy_from_slice(&session.to_le_bytes());
    out[4..8].copy_from_slice(&echo.to_le_bytes());
    out[8..16].copy_from_slice(&resp_seq.to_le_bytes());
    out[16] = count as u8;
    out[17] = RESP_FLAG_RESEND;
    for i in 0..count {
        let rec = get_record(&mut s, r)?;
        let o = RESP_HDR_BYTES + RESP_RECORD_BYTES * i;
        let b: &mut [u8; RESP_RECORD_BYTES] = (&mut out[o..o + RESP_RECORD_BYTES])
            .try_into()
            .map_err(|_| Malformed::BadLength)?;
        rec.write_to(b)?;
    }
    let end = RESP_HDR_BYTES + RESP_RECORD_BYTES * count;
    out[end..end + RESP_TAG_BYTES].fill(0);
    *st = s;
    Ok(end + RESP_TAG_BYTES)
}

fn get_record(s: &mut EntryState, r: &mut Reader<'_>) -> Result<Record, Malformed> {
    let head = r.u8()?;
    let msg_index = match head >> 4 {
        NIBBLE_NONE => MSG_INDEX_NONE,
        i => i,
    };
    let tag = |s: &mut EntryState, r: &mut Reader<'_>| -> Result<u32, Malformed> {
        s.tag = s.tag.wrapping_add(unzigzag(r.leb_u64()?) as u32);
        Ok(s.tag)
    };
    Ok(match head & 0x0f {
        rec::ACK => Record::Ack {
            msg_index,
            client_tag: tag(s, r)?,
        },
        rec::CANCEL_ACK => Record::CancelAck {
            msg_index,
            client_tag: tag(s, r)?,
        },
        rec::REJECT => Record::Reject {
            msg_index,
            code: u16::try_from(r.leb_u64()?)
                .ok()
                .and_then(RejectCode::from_u16)
                .ok_or(Malformed::BadValue)?,
            detail: r.leb_u64()?,
            client_tag: tag(s, r)?,
        },
        rec::FILL => {
            s.price = s.price.wrapping_add(unzigzag(r.leb_u64()?) as i32);
            let qty = r.leb_u32()?;
            let leaves = r.leb_u32()?;
            s.step = s.step.wrapping_add(unzigzag(r.leb_u64()?) as u64);
            Record::Fill {
                msg_index,
                price: s.price,
                qty,
                leaves,
                step: s.step,
                client_tag: tag(s, r)?,
            }
        }
        rec::OUT => {
            let client_tag = tag(s, r)?;
            Record::Out {
                msg_index,
                qty: r.leb_u32()?,
                client_tag,
            }
        }
        rec::BUSY => Record::Busy,
        rec::HALTED => Record::Halted,
        rec::DURABLE => {
            s.step = s.step.wrapping_add(unzigzag(r.leb_u64()?) as u64);
            Record::Durable {
                step: s.step,
                height: r.leb_u64()?,
            }
        }
        rec::FINAL => Record::Final {
            height: r.leb_u64()?,
            view: r.leb_u64()?,
        },
        rec::SEQ_CHANGE => Record::SeqChange {
            epoch: r.leb_u32()?,
            tenure: r.u8()?,
            new_seq: r.u8()?,
            addr: r.array()?,
        },
        rec::DATA_REDIRECT => Record::DataRedirect {
            from: r.u8()?,
            to: r.u8()?,
            resend_from: r.leb_u32()?,
        },
        rec::TENURE_END => Record::TenureEnd {
            epoch: r.leb_u32()?,
            tenure: r.u8()?,
            height: r.leb_u64()?,
            last_step: r.leb_u64()?,
        },
        _ => return Err(Malformed::BadValue),
    })
    .and_then(|rec: Record| {
        // A type without a msg_index must carry 15 (0xFF): the head is canonical.
        if rec.msg_index() != msg_index {
            Err(Malformed::BadValue)
        } else {
            Ok(rec)
        }
    })
}
