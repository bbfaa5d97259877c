//! Lane packet retention (07 §5.5 source 3): the bytes each lane matched, kept so that a
//! replica's `SeqDataReq` gets the canonical copy of a packet — the only source that settles a
//! copy mismatch (§5.6) and the last one when the data tier lost a payload.
//!
//! One table per lane, written by the lane only: a set-associative array of fixed slots
//! (`REQ_MAX_LEN` bytes each), [`RETAIN_WAYS`] slots a set. Every packet the lane logs is kept
//! (`docs/wire.md` "What the box logs"): a new or shed packet under its `(session, pkt_seq)`; a
//! packet answered at packet level (a duplicate, a resend, a conflicting duplicate, BAD_SEQ)
//! under its key and its 8-byte hash, so several packets under one key are each kept and a
//! replica's `SeqDataReq` names the one its record needs by `pkt_hash`. Storing a packet reads
//! one set's tags (one cache line) and its next way, writes one slot and copies its bytes (a packet-level one also
//! one BLAKE3: a client's misbehaviour, not the trading path); nothing allocates after the table
//! is built and nothing locks. A new packet replaces the oldest of its set, so a packet stays
//! until [`RETAIN_WAYS`] newer ones have landed in its set — at the dev home's 5,000 msgs/s over
//! four lanes and the default 8,192 slots, seconds; REP_SEQ_PKT_RETAIN_MS (50 ms) is the floor a
//! REF box sizes it for (slots ≥ peak packets per lane per second × 0.05 × a margin).
//!
//! The table was direct-mapped until 2026-12-07: one later packet landing on a conflicting
//! duplicate's slot (a few in 10,000 at the dev rate, within a retry's time) lost the only copy
//! of it, and the lookup then answered the key's *other* packet — the replica refused it as the
//! copy it already held, for ever, and no block after it could be voted (seen once in CI:
//! `cli/tests/up.rs::a_misbehaving_client_does_not_stop_finality`). Now a lookup answers only
//! the packet whose hash was asked (the key's own packet when its hash is the one asked), and
//! the sets keep a packet through three collisions.
//!
//! The lane answers `SeqDataAsk`s from its ring, a few per poll, into an answer ring the
//! control-port tile drains and sends (no syscall on the lane).

use vyrn_wire::msg::client::REQ_MAX_LEN;

/// Slots per lane by default.
pub const RETAIN_SLOTS: usize = 8192;

/// Slots of one set: a packet is replaced only by the [`RETAIN_WAYS`]-th newer packet of its
/// set.
pub const RETAIN_WAYS: usize = 4;

/// Which packet a slot holds: 16 bytes, a set's four in one cache line.
#[derive(Clone, Copy, Default)]
#[repr(C)]
struct Tag {
    /// `session << 32 | pkt_seq`; 0 = empty (pkt_seq starts at 1).
    key: u64,
    /// The 8-byte hash of a packet kept by hash; 0 for one kept by key alone.
    hash: u64,
}

/// One set's tags.
#[derive(Clone, Copy, Default)]
#[repr(C, align(64))]
struct Set {
    tags: [Tag; RETAIN_WAYS],
}

/// A retained packet's bytes.
#[derive(Clone)]
struct Slot {
    len: u16,
    bytes: [u8; REQ_MAX_LEN],
}

/// A lane's retention table (see the module docs).
pub struct PktRetain {
    sets: Box<[Set]>,
    /// Per set, the way the next new packet takes: its oldest (the ways are taken in turn).
    next: Box<[u8]>,
    slots: Box<[Slot]>,
    mask: usize,
    /// Packets stored.
    pub stored: u64,
    /// Lookups answered.
    pub hits: u64,
    /// Lookups for a packet no longer (or never) held.
    pub misses: u64,
}

impl std::fmt::Debug for PktRetain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PktRetain")
            .field("slots", &self.slots.len())
            .field("stored", &self.stored)
            .field("hits", &self.hits)
            .field("misses", &self.misses)
            .finish()
    }
}

fn key(session: u32, pkt_seq: u32) -> u64 {
    (session as u64) << 32 | pkt_seq as u64
}

impl PktRetain {
    /// A table of `slots` slots (rounded up to a power of two, at least 16).
    pub fn new(slots: usize) -> Self {
        let n = slots.max(16).next_power_of_two();
        PktRetain {
            sets: vec![Set::default(); n / RETAIN_WAYS].into_boxed_slice(),
            next: vec![0; n / RETAIN_WAYS].into_boxed_slice(),
            slots: vec![
                Slot {
                    len: 0,
                    bytes: [0; REQ_MAX_LEN],
                };
                n
            ]
            .into_boxed_slice(),
            mask: n / RETAIN_WAYS - 1,
            stored: 0,
            hits: 0,
            misses: 0,
        }
    }

    fn set(&self, k: u64, hash: u64) -> usize {
        // Fibonacci hashing: consecutive pkt_seqs of one session spread over the table; a
        // packet kept by hash lands elsewhere than its key's own set.
        let k = k ^ hash.rotate_left(29);
        (k.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) as usize & self.mask
    }

    /// The slot of set `s` holding `(k, hash)`.
    fn find(&self, s: usize, k: u64, hash: u64) -> Option<usize> {
        let set = &self.sets[s];
        (0..RETAIN_WAYS)
            .find(|&w| set.tags[w].key == k && set.tags[w].hash == hash)
            .map(|w| s * RETAIN_WAYS + w)
    }

    /// Keep `pkt`, the packet `(session, pkt_seq)` as the lane matched it: by its key
    /// (`pkt_hash` `None`: a new or shed packet), or by its key and 8-byte hash (a packet
    /// answered at packet level). It replaces the packet kept under the same name, else the
    /// oldest of its set. A packet longer than any request (never accepted by a lane) or with
    /// pkt_seq 0 is not kept.
    pub fn put(&mut self, session: u32, pkt_seq: u32, pkt: &[u8], pkt_hash: Option<u64>) {
        if pkt_seq == 0 || pkt.is_empty() || pkt.len() > REQ_MAX_LEN {
            return;
        }
        let k = key(session, pkt_seq);
        let h = pkt_hash.unwrap_or(0);
        let s = self.set(k, h);
        let i = self.find(s, k, h).unwrap_or_else(|| {
            let w = self.next[s] as usize % RETAIN_WAYS;
            self.next[s] = ((w + 1) % RETAIN_WAYS) as u8;
            s * RETAIN_WAYS + w
        });
        self.stored += 1;
        self.sets[s].tags[i % RETAIN_WAYS] = Tag { key: k, hash: h };
        let slot = &mut self.slots[i];
        slot.len = pkt.len() as u16;
        slot.bytes[..pkt.len()].copy_from_slice(pkt);
    }

    /// The packet `(session, pkt_seq)` whose 8-byte hash is `pkt_hash`, while held: the one
    /// kept by that hash, else the one kept by the key if its own hash is `pkt_hash` (0 asks
    /// for the key's packet, whatever its hash). Never another packet of the key: the asker
    /// could not use it, and would ask again for ever.
    pub fn get(&mut self, session: u32, pkt_seq: u32, pkt_hash: u64) -> Option<&[u8]> {
        let k = key(session, pkt_seq);
        let by_hash = (pkt_hash != 0)
            .then(|| self.find(self.set(k, pkt_hash), k, pkt_hash))
            .flatten();
        let i = by_hash.or_else(|| {
            let i = self.find(self.set(k, 0), k, 0)?;
            let s = &self.slots[i];
            let own = || vyrn_wire::msg::client::pkt_hash(&s.bytes[..s.len as usize]).ok();
            (pkt_hash == 0 || own() == Some(pkt_hash)).then_some(i)
        });
        let Some(i) = i.filter(|_| pkt_seq != 0) else {
            self.misses += 1;
            return None;
        };
        self.hits += 1;
        let s = &self.slots[i];
        Some(&s.bytes[..s.len as usize])
    }
}

/// A `SeqDataReq` for a lane: the packet and who asked.
#[derive(Debug, Clone, Copy)]
pub struct SeqDataAsk {
    /// SessionId.
    pub session: u32,
    /// pkt_seq.
    pub pkt_seq: u32,
    /// The record's 8-byte hash (0: the replica has none yet).
    pub pkt_hash: u64,
    /// The asking replica's control address.
    pub src: std::net::SocketAddr,
}

/// Bytes of one encoded `SeqData` at most: type, session, pkt_seq, length, the packet.
pub const SEQ_DATA_MAX: usize = 1 + 4 + 4 + 2 + REQ_MAX_LEN;

/// A lane's answer: the encoded `SeqData` and where it goes.
#[derive(Clone, Copy)]
pub struct SeqDataAnswer {
    /// The asking replica.
    pub to: std::net::SocketAddr,
    /// Bytes used in `msg`.
    pub len: u16,
    /// The encoded `SeqData`.
    pub msg: [u8; SEQ_DATA_MAX],
}

impl std::fmt::Debug for SeqDataAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SeqDataAnswer")
            .field("to", &self.to)
            .field("len", &self.len)
            .finish()
    }
}

impl SeqDataAnswer {
    /// The answer to `ask` from `pkt`, encoded in place (no allocation); `None` where
    /// `SeqData` refuses the packet.
    pub fn new(ask: &SeqDataAsk, pkt: &[u8]) -> Option<Self> {
        if ask.pkt_seq == 0 || pkt.is_empty() || pkt.len() > REQ_MAX_LEN {
            return None;
        }
        let mut msg = [0u8; SEQ_DATA_MAX];
        msg[0] = vyrn_wire::msg::ctrl::SeqData::TYPE;
        msg[1..5].copy_from_slice(&ask.session.to_le_bytes());
        msg[5..9].copy_from_slice(&ask.pkt_seq.to_le_bytes());
        msg[9..11].copy_from_slice(&(pkt.len() as u16).to_le_bytes());
        msg[11..11 + pkt.len()].copy_from_slice(pkt);
        Some(SeqDataAnswer {
            to: ask.src,
            len: (11 + pkt.len()) as u16,
            msg,
        })
    }

    /// The message bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.msg[..self.len as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vyrn_wire::msg::ctrl::{CtrlMsg, SeqData};

    #[test]
    fn keeps_the_newest_and_answers_in_the_wire_layout() {
        let mut r = PktRetain::new(16);
        assert_eq!(r.get(1, 1, 0), None);
        for seq in 1..=200u32 {
            r.put(7, seq, &[seq as u8; 40], None);
        }
        // The newest packet is always held; a slot holds one key at a time.
        assert_eq!(r.get(7, 200, 0), Some(&[200u8; 40][..]));
        let held = (1..=200u32).filter(|&s| r.get(7, s, 0).is_some()).count();
        assert!(held <= 16, "{held}");
        assert_eq!(r.get(8, 200, 0), None, "another session");
        r.put(7, 0, &[1], None);
        r.put(7, 5, &[0; REQ_MAX_LEN + 1], None);
        assert_eq!(r.stored, 200, "pkt_seq 0 and oversize packets are not kept");
        let ask = SeqDataAsk {
            session: 7,
            pkt_seq: 200,
            pkt_hash: 0,
            src: "127.0.0.1:9".parse().unwrap(),
        };
        let a = SeqDataAnswer::new(&ask, &[200u8; 40]).unwrap();
        assert_eq!(
            CtrlMsg::parse(a.bytes()).unwrap(),
            CtrlMsg::SeqData(SeqData {
                session: 7,
                pkt_seq: 200,
                pkt: vec![200u8; 40]
            })
        );
        assert!(SeqDataAnswer::new(&ask, &[]).is_none());
    }

    #[test]
    fn keeps_every_packet_logged_under_one_key_apart_by_hash() {
        let mut r = PktRetain::new(1 << 12);
        // The new packet of (7, 3), then two packet-level ones under the same key: a
        // conflicting duplicate and a second one.
        r.put(7, 3, &[1; 48], None);
        r.put(7, 3, &[2; 48], Some(0xAAAA));
        r.put(7, 3, &[3; 64], Some(0xBBBB));
        assert_eq!(r.get(7, 3, 0xAAAA), Some(&[2u8; 48][..]));
        assert_eq!(r.get(7, 3, 0xBBBB), Some(&[3u8; 64][..]));
        // No hash asks for the copy kept by the key; an unknown hash gets it only if it is
        // its own (these bytes are no packet: they have none).
        assert_eq!(r.get(7, 3, 0), Some(&[1u8; 48][..]));
        assert_eq!(r.get(7, 3, 0xCCCC), None);
        assert_eq!(r.get(7, 4, 0xAAAA), None, "another key");
        // A hash-kept copy is never answered for a key-only ask of another key.
        let mut r = PktRetain::new(16);
        r.put(9, 1, &[4; 48], Some(0x1234));
        assert_eq!(r.get(9, 1, 0), None);
        assert_eq!(r.get(9, 1, 0x1234), Some(&[4u8; 48][..]));
    }

    /// A request packet of `count` messages under `(session, pkt_seq)`, its bytes from `fill`.
    fn packet(session: u32, pkt_seq: u32, count: u8, fill: u8) -> Vec<u8> {
        use vyrn_wire::msg::client::{req_len, REQ_HDR_BYTES};
        let mut b = vec![fill; req_len(count as usize)];
        b[..REQ_HDR_BYTES].fill(0);
        b[2] = count;
        b[4..8].copy_from_slice(&session.to_le_bytes());
        b[8..12].copy_from_slice(&pkt_seq.to_le_bytes());
        b
    }

    fn hash_of(p: &[u8]) -> u64 {
        vyrn_wire::msg::client::pkt_hash(p).unwrap()
    }

    /// The CI failure of 2026-12-07 (`a_misbehaving_client_does_not_stop_finality`): a
    /// conflicting duplicate's slot taken by a later packet, then a replica's ask for it
    /// answered with the key's first packet, which the replica already held and refused, for
    /// ever. A copy asked for by hash is the one answered, or none.
    #[test]
    fn an_ask_by_hash_is_never_answered_with_another_packet_of_the_key() {
        let mut r = PktRetain::new(16);
        let first = packet(2, 53, 10, 1);
        let other = packet(2, 53, 3, 2);
        r.put(2, 53, &first, None);
        // The new packet is answered for its own hash, and for no hash.
        assert_eq!(r.get(2, 53, hash_of(&first)), Some(&first[..]));
        assert_eq!(r.get(2, 53, 0), Some(&first[..]));
        // The conflicting duplicate was never kept (or is gone): no answer, not the first.
        assert_eq!(r.get(2, 53, hash_of(&other)), None);
        r.put(2, 53, &other, Some(hash_of(&other)));
        assert_eq!(r.get(2, 53, hash_of(&other)), Some(&other[..]));
        assert_eq!(r.get(2, 53, hash_of(&first)), Some(&first[..]));
        assert_eq!((r.hits, r.misses), (4, 1));
    }

    /// A packet stays through RETAIN_WAYS − 1 newer packets landing in its set (with one slot a
    /// key, the first of them took it), and the oldest of a set goes first.
    #[test]
    fn a_packet_outlives_collisions_in_its_set() {
        let mut r = PktRetain::new(64);
        let dup = packet(2, 53, 3, 2);
        let h = hash_of(&dup);
        r.put(2, 53, &dup, Some(h));
        let set = r.set(key(2, 53), h);
        // Later packets of another session whose key lands in the same set.
        let same: Vec<u32> = (1..100_000u32)
            .filter(|&q| r.set(key(9, q), 0) == set)
            .take(RETAIN_WAYS)
            .collect();
        assert_eq!(same.len(), RETAIN_WAYS);
        for &q in &same[..RETAIN_WAYS - 1] {
            r.put(9, q, &packet(9, q, 1, 3), None);
        }
        assert_eq!(
            r.get(2, 53, h),
            Some(&dup[..]),
            "kept through the collisions"
        );
        for &q in &same[..RETAIN_WAYS - 1] {
            assert!(r.get(9, q, 0).is_some());
        }
        // Storing the same packet again takes no other slot.
        r.put(2, 53, &dup, Some(h));
        assert!(same[..RETAIN_WAYS - 1]
            .iter()
            .all(|&q| r.get(9, q, 0).is_some()));
        // The set's next new packet replaces its oldest: the duplicate.
        let q = same[RETAIN_WAYS - 1];
        r.put(9, q, &packet(9, q, 1, 3), None);
        assert_eq!(r.get(2, 53, h), None);
        assert!(r.get(9, q, 0).is_some() && r.get(9, same[0], 0).is_some());
    }
}
