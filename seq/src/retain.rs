//! Lane packet retention (07 §5.5 source 3): the bytes each lane matched, kept so that a
//! replica's `SeqDataReq` gets the canonical copy of a packet — the only source that settles a
//! copy mismatch (§5.6) and the last one when the data tier lost a payload.
//!
//! One table per lane, written by the lane only: a direct-mapped array of fixed slots
//! (`REQ_MAX_LEN` bytes each). Every packet the lane logs is kept (`docs/wire.md` "What the box
//! logs"): a new or shed packet in the slot of its `(session, pkt_seq)`; a packet answered at
//! packet level (a duplicate, a resend, a conflicting duplicate, BAD_SEQ) in the slot of its key
//! and its 8-byte hash, so several packets under one key are each kept and a replica's
//! `SeqDataReq` names the one its record needs by `pkt_hash`. Storing a packet is one slot
//! write and one copy of its bytes (a packet-level one also one BLAKE3: a client's
//! misbehaviour, not the trading path); nothing allocates after the table is built and nothing
//! locks. A newer packet that lands on an occupied slot replaces the older one, so the table
//! keeps roughly its last `slots` packets — at the dev home's 5,000 msgs/s over four lanes and
//! the default 8,192 slots, several seconds; REP_SEQ_PKT_RETAIN_MS (50 ms) is the floor a REF
//! box sizes it for (slots ≥ peak packets per lane per second × 0.05).
//!
//! The lane answers `SeqDataAsk`s from its ring, a few per poll, into an answer ring the
//! control-port tile drains and sends (no syscall on the lane).

use vyrn_wire::msg::client::REQ_MAX_LEN;

/// Slots per lane by default.
pub const RETAIN_SLOTS: usize = 8192;

/// One retained packet.
#[derive(Clone)]
struct Slot {
    /// `session << 32 | pkt_seq`; 0 = empty (pkt_seq starts at 1).
    key: u64,
    /// The 8-byte hash of a packet kept by hash; 0 for one kept by key alone.
    hash: u64,
    len: u16,
    bytes: [u8; REQ_MAX_LEN],
}

/// A lane's retention table (see the module docs).
pub struct PktRetain {
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
            slots: vec![
                Slot {
                    key: 0,
                    hash: 0,
                    len: 0,
                    bytes: [0; REQ_MAX_LEN],
                };
                n
            ]
            .into_boxed_slice(),
            mask: n - 1,
            stored: 0,
            hits: 0,
            misses: 0,
        }
    }

    fn index(&self, k: u64, hash: u64) -> usize {
        // Fibonacci hashing: consecutive pkt_seqs of one session spread over the table; a
        // packet kept by hash lands elsewhere than its key's own slot.
        let k = k ^ hash.rotate_left(29);
        (k.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) as usize & self.mask
    }

    /// Keep `pkt`, the packet `(session, pkt_seq)` as the lane matched it: by its key
    /// (`pkt_hash` `None`: a new or shed packet), or by its key and 8-byte hash (a packet
    /// answered at packet level). A packet longer than any request (never accepted by a lane)
    /// or with pkt_seq 0 is not kept.
    pub fn put(&mut self, session: u32, pkt_seq: u32, pkt: &[u8], pkt_hash: Option<u64>) {
        if pkt_seq == 0 || pkt.is_empty() || pkt.len() > REQ_MAX_LEN {
            return;
        }
        let k = key(session, pkt_seq);
        let h = pkt_hash.unwrap_or(0);
        let i = self.index(k, h);
        let s = &mut self.slots[i];
        s.key = k;
        s.hash = h;
        s.len = pkt.len() as u16;
        s.bytes[..pkt.len()].copy_from_slice(pkt);
        self.stored += 1;
    }

    /// The packet `(session, pkt_seq)` whose 8-byte hash is `pkt_hash`, while held: the one
    /// kept by that hash, else the one kept by the key (whose hash the asker checks; 0 asks for
    /// it alone).
    pub fn get(&mut self, session: u32, pkt_seq: u32, pkt_hash: u64) -> Option<&[u8]> {
        let k = key(session, pkt_seq);
        let by_hash = self.index(k, pkt_hash);
        let by_key = self.index(k, 0);
        let i = if pkt_hash != 0
            && self.slots[by_hash].key == k
            && self.slots[by_hash].hash == pkt_hash
        {
            by_hash
        } else if self.slots[by_key].key == k && self.slots[by_key].hash == 0 {
            by_key
        } else {
            self.misses += 1;
            return None;
        };
        if pkt_seq == 0 {
            self.misses += 1;
            return None;
        }
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
        // An unknown hash (or none) gets the copy kept by the key.
        assert_eq!(r.get(7, 3, 0), Some(&[1u8; 48][..]));
        assert_eq!(r.get(7, 3, 0xCCCC), Some(&[1u8; 48][..]));
        assert_eq!(r.get(7, 4, 0xAAAA), None, "another key");
        // A hash-kept copy is never answered for a key-only ask of another key.
        let mut r = PktRetain::new(16);
        r.put(9, 1, &[4; 48], Some(0x1234));
        assert_eq!(r.get(9, 1, 0), None);
        assert_eq!(r.get(9, 1, 0x1234), Some(&[4u8; 48][..]));
    }
}
