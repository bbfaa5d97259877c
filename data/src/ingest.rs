//! The first stages of 07 §5.2: parse, MAC, full hash. Each is a tile with its own state and
//! a pure step; none allocates, locks or reads a clock.
//!
//! - [`Parse`] checks the packet's structure and book and resolves its session to a dense index.
//! - [`Mac`] checks `tag_seq` under the session's `K_seq`.
//! - [`full_hash`] is the 32-byte BLAKE3 of missing-chapters §2 (flags byte read as 0, tag
//!   excluded), computed from one stack copy and the one-shot `blake3::hash`.

use core::fmt;

use vyrn_wire::header::Hash;
use vyrn_wire::msg::client::{
    siphash128, ReqReject, Request, SipKey, REQ_HDR_BYTES, REQ_TAG_BYTES,
};

/// Why a client packet was not stored: one variant, and one counter, per drop reason
/// (07 §5.2). Nothing the network sends can do anything but produce one of these.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IngestError {
    /// Length below 48, or not `32 + 16·count`.
    BadLen,
    /// `count` outside 1..=10.
    BadCount,
    /// A flag other than `resend` set.
    BadFlags,
    /// Reserved bytes 12..16 not zero.
    BadReserved,
    /// `pkt_seq` 0.
    BadSeq,
    /// A book this home does not serve.
    BadBook,
    /// A session this box has no key for.
    UnknownSession,
    /// `tag_seq` does not verify (reported as `DataBadMac`).
    BadMac,
    /// A repeat with an equal full hash.
    Duplicate,
    /// Below the session's window.
    Late,
    /// A repeat inside the window whose first copy has left the ring.
    RepeatEvicted,
}

impl IngestError {
    /// The counter this reason increments (see [`Counters`](crate::Counters)).
    pub const fn counter(self) -> &'static str {
        match self {
            IngestError::BadLen => "drop_bad_len",
            IngestError::BadCount => "drop_bad_count",
            IngestError::BadFlags => "drop_bad_flags",
            IngestError::BadReserved => "drop_bad_reserved",
            IngestError::BadSeq => "drop_bad_seq",
            IngestError::BadBook => "drop_bad_book",
            IngestError::UnknownSession => "drop_unknown_session",
            IngestError::BadMac => "drop_bad_mac",
            IngestError::Duplicate => "drop_duplicate",
            IngestError::Late => "drop_late",
            IngestError::RepeatEvicted => "drop_repeat_evicted",
        }
    }
}

impl From<ReqReject> for IngestError {
    fn from(r: ReqReject) -> Self {
        match r {
            ReqReject::BadCount => IngestError::BadCount,
            ReqReject::BadFlags => IngestError::BadFlags,
            ReqReject::BadReserved => IngestError::BadReserved,
            ReqReject::BadSeq => IngestError::BadSeq,
            ReqReject::BadTag => IngestError::BadMac,
            // BadLen, and message-level codes `Request::parse` never returns.
            _ => IngestError::BadLen,
        }
    }
}

impl fmt::Display for IngestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.counter())
    }
}

impl std::error::Error for IngestError {}

/// A packet that passed [`Parse`]: its checked view and its session's dense index.
#[derive(Debug, Clone, Copy)]
pub struct Parsed<'a> {
    /// The packet, structure checked.
    pub req: Request<'a>,
    /// Index of its session in the box's session arrays.
    pub sidx: u32,
}

/// Parse tile (07 §5.2 step 1): `count ∈ 1..=10`, `len = 32 + 16·count`, `reserved = 0`,
/// `pkt_seq ≥ 1`, only the `resend` flag, a served book, a known session. State: a 65536-bit
/// book map and an open-addressed session table, both built once.
pub struct Parse {
    books: Box<[u64; 1024]>,
    /// Open-addressed: `sidx + 1`, 0 = empty; probed linearly from `mix(session)`.
    table: Box<[u32]>,
    /// Session id per `sidx`.
    ids: Box<[u32]>,
    mask: usize,
    seed: u64,
}

impl fmt::Debug for Parse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Parse")
            .field("sessions", &self.ids.len())
            .field("table", &self.table.len())
            .finish()
    }
}

/// The splitmix64 finaliser over `x ^ seed`: the index hash of every table in this crate.
#[inline]
pub(crate) fn mix(x: u64, seed: u64) -> u64 {
    let mut z = x ^ seed;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Parse {
    /// Build from the served books and the session ids (distinct; `sidx` = position).
    pub fn new(books: &[u16], sessions: &[u32], seed: u64) -> Self {
        let mut map = Box::new([0u64; 1024]);
        for &b in books {
            map[b as usize / 64] |= 1 << (b % 64);
        }
        let size = (sessions.len() * 2).next_power_of_two().max(16);
        let mask = size - 1;
        let mut table = vec![0u32; size].into_boxed_slice();
        for (i, &s) in sessions.iter().enumerate() {
            let mut p = mix(s as u64, seed) as usize & mask;
            while table[p] != 0 {
                p = (p + 1) & mask;
            }
            table[p] = i as u32 + 1;
        }
        Parse {
            books: map,
            table,
            ids: sessions.to_vec().into_boxed_slice(),
            mask,
            seed,
        }
    }

    /// Whether this home serves `book`.
    #[inline]
    pub fn serves(&self, book: u16) -> bool {
        self.books[book as usize / 64] & (1 << (book % 64)) != 0
    }

    /// The dense index of `session`, if known.
    #[inline]
    pub fn session_index(&self, session: u32) -> Option<u32> {
        let mut p = mix(session as u64, self.seed) as usize & self.mask;
        loop {
            let e = self.table[p];
            if e == 0 {
                return None;
            }
            if self.ids[e as usize - 1] == session {
                return Some(e - 1);
            }
            p = (p + 1) & self.mask;
        }
    }

    /// Session id of a dense index.
    pub fn session_id(&self, sidx: u32) -> u32 {
        self.ids[sidx as usize]
    }

    /// The parse step.
    #[inline]
    pub fn parse<'a>(&self, pkt: &'a [u8]) -> Result<Parsed<'a>, IngestError> {
        let req = Request::parse(pkt)?;
        if !self.serves(req.book()) {
            return Err(IngestError::BadBook);
        }
        let sidx = self
            .session_index(req.session())
            .ok_or(IngestError::UnknownSession)?;
        Ok(Parsed { req, sidx })
    }
}

/// MAC tile (07 §5.2 step 2, BASE): `tag_seq` under the session's `K_seq`, over the bytes as
/// sent, compared in constant time. State: one key per session.
pub struct Mac {
    keys: Box<[SipKey]>,
}

impl fmt::Debug for Mac {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Keys are secrets: never printed.
        f.debug_struct("Mac")
            .field("sessions", &self.keys.len())
            .finish()
    }
}

impl Mac {
    /// One `K_seq` per session index.
    pub fn new(keys: Vec<SipKey>) -> Self {
        Mac {
            keys: keys.into_boxed_slice(),
        }
    }

    /// The MAC step.
    #[inline]
    pub fn check(&self, p: &Parsed<'_>) -> Result<(), IngestError> {
        let key = &self.keys[p.sidx as usize];
        let want = siphash128(key, p.req.signed_part());
        let got = p.req.tag();
        let mut d = 0u8;
        for i in 0..16 {
            d |= want[i] ^ got[i];
        }
        if d == 0 {
            Ok(())
        } else {
            Err(IngestError::BadMac)
        }
    }
}

/// Full hash (07 §5.2 step 4, missing-chapters §2): BLAKE3-256 over bytes `0..16+16n` with the
/// tag excluded and byte 3 (flags) read as 0 (`vyrn_wire`'s one-shot
/// [`full_hash_signed`](vyrn_wire::msg::client::full_hash_signed)). `pkt` must have passed
/// [`Parse`]; a shorter slice hashes whatever bytes it has.
#[inline]
pub fn full_hash(pkt: &[u8]) -> Hash {
    vyrn_wire::msg::client::full_hash_signed(&pkt[..pkt.len().saturating_sub(REQ_TAG_BYTES)])
}

/// True when two parsed packets hash alike: bytes `0..16+16n` equal with byte 3 ignored (so
/// exactly when their full hashes are equal, short of a BLAKE3 collision). Cheaper than a hash.
#[inline]
pub fn same_content(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() || a.len() < REQ_HDR_BYTES + REQ_TAG_BYTES {
        return false;
    }
    let n = a.len() - REQ_TAG_BYTES;
    a[..3] == b[..3] && a[4..n] == b[4..n]
}

#[cfg(test)]
mod tests {
    use super::*;
    use vyrn_wire::msg::client::{full_hash as wire_full_hash, Msg, MsgType, RequestPacket, Side};

    fn pkt(resend: bool, count: usize) -> Vec<u8> {
        let m = Msg {
            kind: MsgType::NewGtc,
            side: Side::Buy,
            tick: 100,
            qty: 5,
            client_tag: 9,
        };
        RequestPacket {
            book: 7,
            resend,
            session: 0x1001,
            pkt_seq: 3,
            msgs: vec![m; count],
        }
        .to_bytes(&[1; 16])
        .unwrap()
    }

    #[test]
    fn full_hash_matches_wire_and_ignores_resend() {
        for count in [1, 5, 10] {
            let a = pkt(false, count);
            let b = pkt(true, count);
            assert_eq!(full_hash(&a), wire_full_hash(&a).unwrap());
            assert_eq!(full_hash(&a), full_hash(&b));
            assert!(same_content(&a, &b));
            assert_ne!(a, b, "flags and tag differ");
        }
        assert!(!same_content(&pkt(false, 1), &pkt(false, 2)));
    }

    #[test]
    fn parse_resolves_sessions_and_books() {
        let ids: Vec<u32> = (0..1000).map(|i| i * 7919 + 1).collect();
        let p = Parse::new(&[7, 65535], &ids, 42);
        for (i, &s) in ids.iter().enumerate() {
            assert_eq!(p.session_index(s), Some(i as u32));
            assert_eq!(p.session_id(i as u32), s);
        }
        assert_eq!(p.session_index(2), None);
        assert!(p.serves(7) && p.serves(65535) && !p.serves(8) && !p.serves(0));
    }
}
