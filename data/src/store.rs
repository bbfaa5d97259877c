//! Store tile (07 §5.2 step 5): the RAM ring and its two open-addressed indexes.
//!
//! The [`Ring`] is an array of fixed slots, one per packet, preallocated for `pkts_per_s ×
//! seconds` packets (`REP_DATA_RING_S`, 07 §5.1). Every packet written gets the next ring
//! sequence number `seq` (from 1); slot `(seq − 1) mod capacity` holds it until the ring wraps.
//! A slot remembers its `seq`, so a stale reference (an index entry, a frame log entry) is
//! recognised by comparing sequence numbers and is never read as the newer packet.
//!
//! Two [`Index`]es point into it, each an open-addressed table of `(key, seq)` entries of
//! [`INDEX_PER_SLOT`] times the ring's size, probed over a fixed window of [`PROBE`] entries:
//!
//! - **by `pkt_hash`** — the table of 07 §5.2 ("keyed by `pkt_hash` that holds `(session,
//!   pkt_seq, ring offset)`"); a lookup also matches `(session, pkt_seq)` against the slot, since
//!   8-byte collisions do occur at 100M/s. It holds every stored copy (conflicting second
//!   copies included).
//! - **by `(session, pkt_seq)`** — for what carries no `pkt_hash`: `DataFetch::Key` (07 §5.5)
//!   and the repeat comparison of dedupe. It holds first copies only.
//!
//! Entries are never deleted: an entry whose slot has been overwritten is *stale* and is reused
//! by the next insert that probes it. An insert that finds neither an empty nor a stale entry in
//! its window replaces the oldest one (counted as `index_displaced_live`; at a load of ≤ 1/4
//! this needs 32 live packets in one 32-entry window). Lookups stop at the first empty entry or
//! after [`PROBE`] entries, so both operations are O(1) with a fixed bound.

use vyrn_wire::msg::client::REQ_MAX_LEN;

use crate::ingest::mix;

/// Bytes one ring slot takes: a 40-byte descriptor and room for the longest request (192 B).
pub const RING_SLOT_BYTES: u64 = 40 + REQ_MAX_LEN as u64;
/// Bytes of one index entry (`key u64`, `ring seq u64`).
pub const INDEX_ENTRY_BYTES: u64 = 16;

const _: () = assert!(core::mem::size_of::<Slot>() as u64 == RING_SLOT_BYTES);
const _: () = assert!(core::mem::size_of::<Entry>() as u64 == INDEX_ENTRY_BYTES);

/// Entries an index probes per insert or lookup.
pub const PROBE: usize = 32;
/// Index entries per ring slot (rounded up to a power of two): a load of ≤ 1/4, at which a
/// full 32-entry probe window is a ~1e-9 event per insert under linear probing. (At 1/2 with
/// 16 probes the benchmark measured ~0.5% of inserts displacing a live entry.)
pub const INDEX_PER_SLOT: usize = 4;

/// One ring slot: a packet and what the box knows of it.
#[derive(Clone, Copy)]
pub struct Slot {
    /// Ring sequence number (0: never written).
    pub seq: u64,
    /// Internal id of the data frame it was fanned out in (0: not forwarded, i.e. a
    /// conflicting second copy).
    pub frame: u64,
    /// `pkt_hash` (first 8 bytes of the full hash, little-endian).
    pub pkt_hash: u64,
    /// `SessionId`.
    pub session: u32,
    /// `pkt_seq`.
    pub pkt_seq: u32,
    /// Packet length, 48..=192.
    pub len: u16,
    /// The packet as received (tag included).
    pub bytes: [u8; REQ_MAX_LEN],
}

impl Slot {
    const EMPTY: Slot = Slot {
        seq: 0,
        frame: 0,
        pkt_hash: 0,
        session: 0,
        pkt_seq: 0,
        len: 0,
        bytes: [0; REQ_MAX_LEN],
    };

    /// The packet's bytes.
    #[inline]
    pub fn packet(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }
}

impl core::fmt::Debug for Slot {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Slot")
            .field("seq", &self.seq)
            .field("frame", &self.frame)
            .field("session", &self.session)
            .field("pkt_seq", &self.pkt_seq)
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

/// The RAM ring: `capacity` preallocated slots, overwritten oldest first.
pub struct Ring {
    slots: Box<[Slot]>,
    /// Sequence number the next packet gets (from 1).
    next_seq: u64,
    /// Slot the next packet goes to: `(next_seq − 1) mod capacity`, kept without a division.
    next_pos: usize,
}

impl core::fmt::Debug for Ring {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Ring")
            .field("capacity", &self.slots.len())
            .field("next_seq", &self.next_seq)
            .finish()
    }
}

impl Ring {
    /// A ring of `capacity` (≥ 1) slots, all allocated and touched now.
    pub fn new(capacity: usize) -> Self {
        Ring {
            slots: vec![Slot::EMPTY; capacity.max(1)].into_boxed_slice(),
            next_seq: 1,
            next_pos: 0,
        }
    }

    /// Slots.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// The sequence number the next packet will get.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// The oldest sequence number still held (equal to `next_seq` when empty).
    pub fn oldest_seq(&self) -> u64 {
        self.next_seq.saturating_sub(self.slots.len() as u64).max(1)
    }

    /// Whether the packet written as `seq` is still in the ring.
    #[inline]
    pub fn is_live(&self, seq: u64) -> bool {
        seq != 0 && seq < self.next_seq && seq >= self.oldest_seq()
    }

    /// The slot written as `seq`, if still held.
    #[inline]
    pub fn get(&self, seq: u64) -> Option<&Slot> {
        if !self.is_live(seq) {
            return None;
        }
        let s = &self.slots[((seq - 1) % self.slots.len() as u64) as usize];
        debug_assert_eq!(s.seq, seq);
        (s.seq == seq).then_some(s)
    }

    /// Mutable form of [`get`](Self::get).
    #[inline]
    pub fn get_mut(&mut self, seq: u64) -> Option<&mut Slot> {
        if !self.is_live(seq) {
            return None;
        }
        let n = self.slots.len() as u64;
        let s = &mut self.slots[((seq - 1) % n) as usize];
        (s.seq == seq).then_some(s)
    }

    /// Write a packet (≤ 192 bytes; longer input is cut, which parse never lets through).
    /// Returns its sequence number and whether a live packet was overwritten.
    #[inline]
    pub fn push(&mut self, pkt: &[u8], session: u32, pkt_seq: u32, pkt_hash: u64) -> (u64, bool) {
        let seq = self.next_seq;
        let s = &mut self.slots[self.next_pos];
        let evicted = s.seq != 0;
        let n = pkt.len().min(REQ_MAX_LEN);
        s.seq = seq;
        s.frame = 0;
        s.pkt_hash = pkt_hash;
        s.session = session;
        s.pkt_seq = pkt_seq;
        s.len = n as u16;
        s.bytes[..n].copy_from_slice(&pkt[..n]);
        self.next_seq += 1;
        self.next_pos += 1;
        if self.next_pos == self.slots.len() {
            self.next_pos = 0;
        }
        (seq, evicted)
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct Entry {
    key: u64,
    /// Ring seq; 0 = empty.
    seq: u64,
}

/// An open-addressed table of `key → ring seq` (see the module docs). Lookups verify the slot.
pub struct Index {
    entries: Box<[Entry]>,
    mask: usize,
    seed: u64,
}

impl core::fmt::Debug for Index {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Index")
            .field("entries", &self.entries.len())
            .finish()
    }
}

/// What [`Index::insert`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inserted {
    /// Into an empty or stale entry.
    Free,
    /// Over the oldest entry of a full window, still live (it can no longer be found).
    DisplacedLive,
}

impl Index {
    /// A table for a ring of `ring_capacity` slots: the next power of two ≥
    /// `INDEX_PER_SLOT` × that, ≥ `PROBE`.
    pub fn new(ring_capacity: usize, seed: u64) -> Self {
        let size = (ring_capacity.saturating_mul(INDEX_PER_SLOT))
            .next_power_of_two()
            .max(PROBE);
        Index {
            entries: vec![Entry::default(); size].into_boxed_slice(),
            mask: size - 1,
            seed,
        }
    }

    /// Entries in the table.
    pub fn size(&self) -> usize {
        self.entries.len()
    }

    #[inline]
    fn start(&self, key: u64) -> usize {
        mix(key, self.seed) as usize & self.mask
    }

    /// Point `key` at ring `seq`.
    #[inline]
    pub fn insert(&mut self, key: u64, seq: u64, ring: &Ring) -> Inserted {
        let start = self.start(key);
        let mut oldest = start;
        for i in 0..PROBE {
            let p = (start + i) & self.mask;
            let e = self.entries[p];
            if e.seq == 0 || !ring.is_live(e.seq) {
                self.entries[p] = Entry { key, seq };
                return Inserted::Free;
            }
            if e.seq < self.entries[oldest].seq {
                oldest = p;
            }
        }
        self.entries[oldest] = Entry { key, seq };
        Inserted::DisplacedLive
    }

    /// The first live slot under `key` for which `matches` holds.
    #[inline]
    pub fn lookup<'r>(
        &self,
        key: u64,
        ring: &'r Ring,
        mut matches: impl FnMut(&Slot) -> bool,
    ) -> Option<&'r Slot> {
        let start = self.start(key);
        for i in 0..PROBE {
            let e = self.entries[(start + i) & self.mask];
            if e.seq == 0 {
                return None;
            }
            if e.key == key {
                if let Some(s) = ring.get(e.seq) {
                    if matches(s) {
                        return Some(s);
                    }
                }
            }
        }
        None
    }
}

/// The `(session, pkt_seq)` key as one u64.
#[inline]
pub fn pkt_key(session: u32, pkt_seq: u32) -> u64 {
    (session as u64) << 32 | pkt_seq as u64
}

/// The store tile: the ring and both indexes.
#[derive(Debug)]
pub struct Store {
    /// The ring.
    pub ring: Ring,
    by_hash: Index,
    by_key: Index,
}

/// What [`Store::put`] did, for the counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PutStats {
    /// A live packet was overwritten in the ring.
    pub evicted: bool,
    /// Index entries displaced while live (0, 1 or 2).
    pub displaced: u8,
}

impl Store {
    /// A ring of `capacity` slots and its indexes.
    pub fn new(capacity: usize, seed: u64) -> Self {
        Store {
            ring: Ring::new(capacity),
            by_hash: Index::new(capacity, seed),
            by_key: Index::new(capacity, seed.rotate_left(32) ^ 0x5A5A_5A5A),
        }
    }

    /// Store a packet. `first` = the first copy under its `(session, pkt_seq)` (indexed by key
    /// too); a conflicting second copy is indexed by `pkt_hash` only.
    #[inline]
    pub fn put(
        &mut self,
        pkt: &[u8],
        session: u32,
        pkt_seq: u32,
        pkt_hash: u64,
        first: bool,
    ) -> (u64, PutStats) {
        let (seq, evicted) = self.ring.push(pkt, session, pkt_seq, pkt_hash);
        let mut st = PutStats {
            evicted,
            displaced: 0,
        };
        if self.by_hash.insert(pkt_hash, seq, &self.ring) == Inserted::DisplacedLive {
            st.displaced += 1;
        }
        if first
            && self
                .by_key
                .insert(pkt_key(session, pkt_seq), seq, &self.ring)
                == Inserted::DisplacedLive
        {
            st.displaced += 1;
        }
        (seq, st)
    }

    /// The first copy of `(session, pkt_seq)`, if still in the ring.
    #[inline]
    pub fn by_key(&self, session: u32, pkt_seq: u32) -> Option<&Slot> {
        self.by_key
            .lookup(pkt_key(session, pkt_seq), &self.ring, |s| {
                s.session == session && s.pkt_seq == pkt_seq
            })
    }

    /// A stored copy with this `pkt_hash` *and* this `(session, pkt_seq)` for which `also`
    /// holds (07 §5.2: a lookup always matches the key too).
    #[inline]
    pub fn by_hash(
        &self,
        pkt_hash: u64,
        session: u32,
        pkt_seq: u32,
        mut also: impl FnMut(&Slot) -> bool,
    ) -> Option<&Slot> {
        self.by_hash.lookup(pkt_hash, &self.ring, |s| {
            s.pkt_hash == pkt_hash && s.session == session && s.pkt_seq == pkt_seq && also(s)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(i: u32) -> Vec<u8> {
        let mut v = vec![0u8; 48];
        v[..4].copy_from_slice(&i.to_le_bytes());
        v
    }

    #[test]
    fn ring_wraps_and_forgets() {
        let mut r = Ring::new(4);
        for i in 1..=10u32 {
            let (seq, ev) = r.push(&body(i), 1, i, i as u64);
            assert_eq!(seq, i as u64);
            assert_eq!(ev, i > 4);
        }
        assert_eq!(r.oldest_seq(), 7);
        for seq in 1..=6 {
            assert!(r.get(seq).is_none(), "{seq} evicted");
        }
        for seq in 7..=10 {
            assert_eq!(r.get(seq).unwrap().pkt_seq, seq as u32);
        }
        assert!(r.get(11).is_none() && r.get(0).is_none());
    }

    /// Eviction: after many wraps, every lookup returns the packet asked for or nothing, never
    /// an evicted or different one, including under forced `pkt_hash` collisions.
    #[test]
    fn index_never_returns_evicted_or_mismatched() {
        let cap = 64;
        let mut st = Store::new(cap, 7);
        let mut displaced = 0;
        for i in 1..=5_000u32 {
            // Only 16 distinct pkt_hash values: heavy collisions on purpose.
            let h = (i % 16) as u64;
            let (_, ps) = st.put(&body(i), i % 3, i, h, true);
            displaced += ps.displaced as u32;
            // Everything still in the ring is found by key; older packets are not.
            if i % 97 == 0 {
                for j in 1..=i {
                    let got = st.by_key(j % 3, j);
                    if j + cap as u32 > i {
                        let s = got.expect("live packet found by key");
                        assert_eq!((s.session, s.pkt_seq), (j % 3, j));
                        assert_eq!(&s.packet()[..4], &j.to_le_bytes());
                    } else {
                        assert!(got.is_none(), "evicted packet {j} returned");
                    }
                    // By hash: a lookup under a colliding hash never returns another key.
                    if let Some(s) = st.by_hash((j % 16) as u64, j % 3, j, |_| true) {
                        assert_eq!((s.session, s.pkt_seq), (j % 3, j));
                        assert!(j + cap as u32 > i);
                    }
                    assert!(st
                        .by_hash((j % 16) as u64 ^ 1, j % 3, j, |_| true)
                        .is_none());
                }
            }
        }
        // A live packet is missing from the hash index only if its entry was displaced, and
        // every displacement is counted.
        let live_found = (5_000 - cap as u32 + 1..=5_000)
            .filter(|&j| st.by_hash((j % 16) as u64, j % 3, j, |_| true).is_some())
            .count();
        assert!(
            live_found + displaced as usize >= cap,
            "{live_found} {displaced}"
        );
    }

    #[test]
    fn index_displaces_oldest_when_window_full() {
        // A ring far larger than the table's probe window, all under one key.
        let mut st = Store::new(1024, 1);
        let mut displaced = 0;
        for i in 1..=(PROBE as u32 + 4) {
            displaced += st.put(&body(i), 9, i, 0xABCD, false).1.displaced as u32;
        }
        assert_eq!(displaced, 4);
        // The 4 oldest are gone from the hash index, the newest PROBE are found.
        for i in 1..=4 {
            assert!(st.by_hash(0xABCD, 9, i, |_| true).is_none());
        }
        for i in 5..=(PROBE as u32 + 4) {
            assert_eq!(st.by_hash(0xABCD, 9, i, |_| true).unwrap().pkt_seq, i);
        }
        // Second copies are not in the key index.
        assert!(st.by_key(9, 5).is_none());
    }
}
