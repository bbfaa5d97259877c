//! A misbehaving client's script (`docs/wire.md` "What the box logs"): every packet kind a
//! client can send that the box answers without executing it, or refuses whole — the resend of
//! a multi-message packet, a packet ahead of sequence (`BAD_SEQ`) and its later fill-in, exact
//! and conflicting duplicates under one `pkt_seq`, messages the lane refuses (a bad type, a
//! cancel with a price, qty 0) and packets no lane logs (count 0 or 16, reserved bits set) —
//! interleaved with valid orders. Every packet is validly tagged under the session's `K_seq`
//! and goes to both the box and the data home, as a client's would. The orders are IOCs far from
//! the market, so the script rests nothing and moves no price.
//!
//! Pure: [`Script::round`] returns the bytes; `vyrn load --misbehave` sends them, and the
//! replica's tests drive the engine and the data side with them.

use vyrn_wire::msg::client::{
    siphash128, Msg, MsgType, Side, SipKey, REQ_FLAG_RESEND, REQ_HDR_BYTES, REQ_MSG_BYTES,
    REQ_TAG_BYTES,
};

/// What the box is expected to do with a scripted packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// A new packet: executed (some messages may be refused).
    New,
    /// Answered at packet level: a resend, an exact or a conflicting duplicate.
    Duplicate,
    /// Ahead of sequence: `BAD_SEQ`.
    Gap,
    /// Refused whole, not logged (count 0 or 11+, reserved bits).
    Dropped,
}

/// One scripted packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scripted {
    /// The packet's bytes, tagged.
    pub bytes: Vec<u8>,
    /// What the box does with it.
    pub expect: Expect,
}

/// The script for one session.
#[derive(Debug, Clone)]
pub struct Script {
    book: u16,
    session: u32,
    k_seq: SipKey,
    /// The session's next fresh `pkt_seq`.
    next: u32,
    tag: u32,
}

/// A far-from-market IOC (never trades, never rests).
fn ioc(tag: u32) -> [u8; REQ_MSG_BYTES] {
    Msg {
        kind: MsgType::NewIoc,
        side: Side::Buy,
        tick: 1,
        qty: 1,
        client_tag: tag,
    }
    .to_bytes()
}

impl Script {
    /// A script for `session` of `book`, whose next fresh `pkt_seq` is `next` (1 for a session
    /// nobody used).
    pub fn new(book: u16, session: u32, k_seq: SipKey, next: u32) -> Self {
        Script {
            book,
            session,
            k_seq,
            next: next.max(1),
            tag: 0x4D00_0000,
        }
    }

    /// The session's next fresh `pkt_seq`.
    pub fn next_pkt_seq(&self) -> u32 {
        self.next
    }

    fn tag(&mut self) -> u32 {
        self.tag = self.tag.wrapping_add(1);
        self.tag
    }

    /// `k` far-from-market IOCs with fresh client tags.
    fn iocs(&mut self, k: usize) -> Vec<[u8; REQ_MSG_BYTES]> {
        (0..k).map(|_| ioc(self.tag())).collect()
    }

    /// A packet of raw 16-byte messages under `pkt_seq`, `count` written as given (so it can
    /// lie), flags and reserved as given, tagged.
    fn raw(&self, pkt_seq: u32, count: u8, flags: u8, reserved: u32, msgs: &[[u8; 16]]) -> Vec<u8> {
        let mut b = Vec::with_capacity(REQ_HDR_BYTES + REQ_MSG_BYTES * msgs.len() + 16);
        b.extend_from_slice(&self.book.to_le_bytes());
        b.push(count);
        b.push(flags);
        b.extend_from_slice(&self.session.to_le_bytes());
        b.extend_from_slice(&pkt_seq.to_le_bytes());
        b.extend_from_slice(&reserved.to_le_bytes());
        for m in msgs {
            b.extend_from_slice(m);
        }
        let tag = siphash128(&self.k_seq, &b);
        b.extend_from_slice(&tag);
        b
    }

    /// A well-formed packet of `msgs` under `pkt_seq`.
    fn pkt(&self, pkt_seq: u32, msgs: &[[u8; 16]]) -> Vec<u8> {
        self.raw(pkt_seq, msgs.len() as u8, 0, 0, msgs)
    }

    /// `p` with `flags.resend` set and its tag recomputed (the full hash is unchanged).
    fn resend(&self, p: &[u8]) -> Vec<u8> {
        let mut b = p.to_vec();
        b[3] |= REQ_FLAG_RESEND;
        let signed = b.len() - REQ_TAG_BYTES;
        let tag = siphash128(&self.k_seq, &b[..signed]);
        b[signed..].copy_from_slice(&tag);
        b
    }

    /// One round: every kind once, in an order a client's bugs could produce. Uses four fresh
    /// `pkt_seq`s; the session stays in sequence after it.
    pub fn round(&mut self) -> Vec<Scripted> {
        let n = self.next;
        self.next = n.wrapping_add(4).max(1);
        let mut out = Vec::with_capacity(16);
        let mut put = |bytes: Vec<u8>, expect: Expect| out.push(Scripted { bytes, expect });
        // A 2-message packet, then its resend after a "lost" answer (07 §9.5).
        let m = self.iocs(2);
        let a = self.pkt(n, &m);
        put(a.clone(), Expect::New);
        put(self.resend(&a), Expect::Duplicate);
        // Ten messages, the last one refused (qty 0).
        let mut ten = self.iocs(9);
        let mut bad = ioc(self.tag());
        bad[8..12].fill(0);
        ten.push(bad);
        let b = self.pkt(n + 1, &ten);
        put(b.clone(), Expect::New);
        // Conflicting duplicates of n + 1: three valid messages; then an unknown type and a
        // cancel with a price (each would be refused, were the packet new).
        let m = self.iocs(3);
        let c = self.pkt(n + 1, &m);
        put(c, Expect::Duplicate);
        let mut unknown = ioc(self.tag());
        unknown[0] = 9;
        let cancel_priced = Msg {
            kind: MsgType::Cancel,
            side: Side::Buy,
            tick: 5,
            qty: 0,
            client_tag: self.tag(),
        }
        .to_bytes();
        put(
            self.pkt(n + 1, &[unknown, cancel_priced]),
            Expect::Duplicate,
        );
        // Packets no lane logs: 16 messages, count 0, reserved bits set.
        let sixteen = self.iocs(16);
        put(self.raw(n + 2, 16, 0, 0, &sixteen), Expect::Dropped);
        put(self.raw(n + 2, 0, 0, 0, &[]), Expect::Dropped);
        let m = self.iocs(1);
        put(self.raw(n + 2, 1, 0, 1, &m), Expect::Dropped);
        // Ahead of sequence (BAD_SEQ), then the packet it skipped, then it again: new now.
        let m = self.iocs(2);
        let f = self.pkt(n + 3, &m);
        put(f.clone(), Expect::Gap);
        let m = self.iocs(1);
        put(self.pkt(n + 2, &m), Expect::New);
        put(f, Expect::New);
        // An exact repeat of the ten (no resend flag), and a one-message conflicting duplicate
        // of the first packet.
        put(b, Expect::Duplicate);
        let m = self.iocs(1);
        put(self.pkt(n, &m), Expect::Duplicate);
        out
    }

    /// Two copies of one new packet that differ (07 §5.6 row 1: "the client sent two different
    /// copies"): a one-message packet under the next fresh `pkt_seq` for the box (copy 1) and
    /// another, with a different quantity under the same `pkt_seq`, for the data box (copy 2),
    /// both validly tagged. The box logs copy 1; the replicas' join finds the data box's copy
    /// under the record's key with another hash and takes the sequencer's (`CopyMismatch`).
    pub fn two_copies(&mut self) -> (Vec<u8>, Vec<u8>) {
        let n = self.next;
        self.next = n.wrapping_add(1).max(1);
        let t = self.tag();
        let one = ioc(t);
        let mut two = one;
        two[8..12].copy_from_slice(&2u32.to_le_bytes());
        (self.pkt(n, &[one]), self.pkt(n, &[two]))
    }

    /// A valid one-message packet under the next fresh `pkt_seq` (the session's next valid
    /// packet after the script: it must be answered).
    pub fn valid(&mut self) -> Vec<u8> {
        let n = self.next;
        self.next = n.wrapping_add(1).max(1);
        let t = self.tag();
        self.pkt(n, &[ioc(t)])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vyrn_wire::msg::client::{req_len, Request};

    #[test]
    fn a_round_has_every_kind_each_validly_tagged() {
        let k = [7u8; 16];
        let mut s = Script::new(1, 42, k, 1);
        let r = s.round();
        assert_eq!(s.next_pkt_seq(), 5);
        let kinds = |e| r.iter().filter(|p| p.expect == e).count();
        assert_eq!(
            (
                kinds(Expect::New),
                kinds(Expect::Duplicate),
                kinds(Expect::Gap)
            ),
            (4, 5, 1)
        );
        assert_eq!(kinds(Expect::Dropped), 3);
        for p in &r {
            let parsed = Request::parse(&p.bytes);
            match p.expect {
                Expect::Dropped => assert!(parsed.is_err(), "{p:?}"),
                _ => {
                    let q = parsed.unwrap();
                    q.verify_tag(&k).unwrap();
                    assert_eq!(q.session(), 42);
                }
            }
        }
        // The resend hashes like its original; the conflicting duplicates do not.
        let h = |i: usize| Request::parse(&r[i].bytes).unwrap().pkt_hash();
        assert_eq!(h(0), h(1));
        assert_ne!(h(2), h(3));
        assert_ne!(h(3), h(4));
        assert_eq!(Request::parse(&r[1].bytes).unwrap().count(), 2);
        assert_eq!(req_len(2), r[0].bytes.len());
        let v = s.valid();
        assert_eq!(Request::parse(&v).unwrap().pkt_seq(), 5);
        // Two different copies of packet 6, each validly tagged.
        let (one, two) = s.two_copies();
        let (a, b) = (Request::parse(&one).unwrap(), Request::parse(&two).unwrap());
        a.verify_tag(&k).unwrap();
        b.verify_tag(&k).unwrap();
        assert_eq!((a.pkt_seq(), b.pkt_seq()), (6, 6));
        assert_ne!(a.pkt_hash(), b.pkt_hash());
        assert_eq!(s.next_pkt_seq(), 7);
    }
}
