//! The replica's data store (07 §5.4): every packet parsed and hashed here, kept by `(session,
//! pkt_seq)` in fixed-size slots, bounded in packets, bytes and age; a pushed or fetched copy
//! comes in through [`DataSide::on_fetched`] or a data frame and settles the records waiting on it.

use super::*;

/// A client packet held inline: at most REQ_MAX_LEN bytes, all `Request::parse` accepts. The
/// store's slots are fixed-size, so storing a payload allocates nothing (a boxed copy per
/// packet was an allocation and, on a fresh page, a page fault per message on the data path,
/// `--bench replica` at the peak mix, 2026-12-03).
#[derive(Clone)]
pub(super) struct PktBuf {
    pub(super) len: u8,
    pub(super) buf: [u8; REQ_MAX_LEN],
}

impl PktBuf {
    /// `b` held inline; `None` past REQ_MAX_LEN.
    #[cfg(test)]
    pub(super) fn new(b: &[u8]) -> Option<Self> {
        let mut buf = [0; REQ_MAX_LEN];
        buf.get_mut(..b.len())?.copy_from_slice(b);
        Some(PktBuf {
            len: u8::try_from(b.len()).ok()?,
            buf,
        })
    }
}

impl std::ops::Deref for PktBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.buf[..self.len as usize]
    }
}

impl std::fmt::Debug for PktBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PktBuf({} bytes)", self.len)
    }
}

/// A payload with its metadata: `B` is its bytes, borrowed from the packet on the way in (no
/// copy until the store's slot) or owned on the way out.
#[derive(Debug, Clone)]
pub(super) struct Payload<B = PktBuf> {
    pub(super) bytes: B,
    pub(super) full: Hash,
    pub(super) count: u8,
    pub(super) origin: Source,
    pub(super) t: u64,
    pub(super) gen: u64,
}

/// A stored payload's slot: what the join reads (the count and full hash), apart from the
/// bytes, which only replay and the repair servers read. The join walks ~64-byte slots, not
/// ~270-byte ones (the bytes inline in the slot made core 3 1.4× slower at the peak mix,
/// `--bench replica`, 2026-12-03).
#[derive(Debug, Clone)]
pub(super) struct Stored {
    pub(super) full: Hash,
    pub(super) count: u8,
    pub(super) len: u8,
    pub(super) origin: Source,
    pub(super) t: u64,
    pub(super) gen: u64,
}

/// A stored payload as the store hands it out: its slot and its bytes.
pub(super) struct PayloadRef<'a> {
    pub(super) m: &'a Stored,
    pub(super) bytes: &'a [u8],
}

impl std::ops::Deref for PayloadRef<'_> {
    type Target = Stored;
    fn deref(&self) -> &Stored {
        self.m
    }
}

/// The payload store: a slab of payloads in arrival order with a small index `(session,
/// pkt_seq) → slot`. The index's buckets are 12 bytes, so a home's worth of keys stays in
/// cache; a lookup touches the index and one slot, and slots are filled in the order copy 2
/// arrives — the order the join and replay read them. (A map holding the payloads themselves
/// had 80-byte buckets: each of a record's lookups — the join, the hash, replay's read — missed
/// cache, ~200 ns per record in replay alone, `--bench replica` 2026-12-03.)
#[derive(Debug, Default)]
pub(super) struct Store {
    /// Each key's first copy.
    pub(super) map: HashMap<PktKey, u32, Seeded>,
    /// The other distinct copies of a key, at most [`EXTRA_COPIES_MAX`] (a conflicting duplicate
    /// the box logged, or a client whose two copies differ: `docs/wire.md` "What the box
    /// logs"). Empty unless a client misbehaves.
    pub(super) extra: HashMap<PktKey, Vec<u32>, Seeded>,
    /// Copies held in `extra`.
    pub(super) n_extra: usize,
    pub(super) slots: Vec<Option<Stored>>,
    /// Each slot's bytes (the first `len`), beside `slots`.
    pub(super) bufs: Vec<[u8; REQ_MAX_LEN]>,
    /// Empty slots, reused newest first.
    pub(super) free: Vec<u32>,
    pub(super) order: VecDeque<(PktKey, u64)>,
    pub(super) bytes: usize,
    pub(super) next_gen: u64,
    /// Payloads past the age of the ring that a live record still needs (its block not yet
    /// voted and replayed): out of `order`, dropped when their records are released.
    pub(super) pinned: std::collections::HashSet<PktKey, Seeded>,
    /// The newest payloads of each session by `pkt_seq`, in front of `map`.
    pub(super) recent: Recent,
}

/// Entries per session in [`Recent`]: a few ms of one busy session's packets.
pub(super) const RECENT_SLOTS: usize = 256;
/// Sessions [`Recent`] keeps a table for (2 KiB each); the rest use the map alone.
pub(super) const RECENT_SESSIONS_MAX: usize = 4096;

/// A direct-mapped table per session, `pkt_seq mod RECENT_SLOTS → (pkt_seq, slot + 1)`, in
/// front of the store's map. A session's `pkt_seq`s come in order, so the join (core 3) and
/// replay's reads walk each session's table in order: one cache line per 8 records where the
/// map's probe touches its control bytes and a bucket at random, two misses a record (`--bench
/// replica`, core 3 at the peak mix, 2026-12-03). Every entry names the slot its key has in
/// `map` (kept so by [`Store::insert`] and [`Store::remove`]); a key that is not here may still
/// be in `map`.
#[derive(Debug, Default)]
pub(super) struct Recent {
    pub(super) at: HashMap<u32, u32, Seeded>,
    /// Session `at[s]`'s table is `rings[at[s] * RECENT_SLOTS..][..RECENT_SLOTS]`.
    pub(super) rings: Vec<(u32, u32)>,
}

impl Recent {
    pub(super) fn get(&self, k: &PktKey) -> Option<u32> {
        let &r = self.at.get(&k.session)?;
        let (seq, s) = *self.rings.get(Self::at(r, k))?;
        (s != 0 && seq == k.pkt_seq).then(|| s - 1)
    }

    pub(super) fn put(&mut self, k: &PktKey, slot: u32) {
        let Some(s1) = slot.checked_add(1) else {
            return;
        };
        let r = match self.at.get(&k.session) {
            Some(&r) => r,
            None if self.at.len() < RECENT_SESSIONS_MAX => {
                let r = self.at.len() as u32;
                // A new session's table (its first payload; capacity reserved at prefault).
                self.rings.resize(self.rings.len() + RECENT_SLOTS, (0, 0));
                self.at.insert(k.session, r);
                r
            }
            None => return,
        };
        if let Some(e) = self.rings.get_mut(Self::at(r, k)) {
            *e = (k.pkt_seq, s1);
        }
    }

    pub(super) fn at(r: u32, k: &PktKey) -> usize {
        r as usize * RECENT_SLOTS + k.pkt_seq as usize % RECENT_SLOTS
    }

    /// `k` left slot `slot`.
    pub(super) fn clear(&mut self, k: &PktKey, slot: u32) {
        if let Some(&r) = self.at.get(&k.session) {
            if let Some(e) = self.rings.get_mut(Self::at(r, k)) {
                if *e == (k.pkt_seq, slot.wrapping_add(1)) {
                    *e = (0, 0);
                }
            }
        }
    }
}

/// The maps keyed by `(session, pkt_seq)` hash with the engine's keyed multiply-fold hasher
/// (per-process seed: a client cannot precompute colliding keys), several times cheaper than
/// std's SipHash on these small keys — one lookup or insert per record and per payload.
pub(super) type Seeded = vyrn_engine::hash::SeededState;

/// The newest live record of each key, `(session, pkt_seq) → (stream, rid)`: a direct-mapped
/// table per session (`pkt_seq mod RECENT_SLOTS`) with a map for the keys whose entry is taken
/// (more than RECENT_SLOTS live records of one session, or sessions past
/// RECENT_SESSIONS_MAX). Core 3 inserts one key per record; a session's keys come in order,
/// so the inserts walk its table in order instead of writing a random bucket of a map sized for
/// every live record (a cache miss per record, `--bench replica`, core 3 at the peak mix,
/// 2026-12-03). A key is in the table or the map, never both.
#[derive(Debug, Default)]
pub(super) struct RecIndex {
    pub(super) at: HashMap<u32, u32, Seeded>,
    /// `(pkt_seq, stream + 1, rid)`; stream 0 marks an empty entry.
    pub(super) rings: Vec<(u32, u8, u64)>,
    pub(super) spill: HashMap<PktKey, (u8, u64), Seeded>,
}

impl RecIndex {
    pub(super) fn pos(&self, k: &PktKey) -> Option<usize> {
        let &r = self.at.get(&k.session)?;
        Some(r as usize * RECENT_SLOTS + k.pkt_seq as usize % RECENT_SLOTS)
    }

    pub(super) fn get(&self, k: &PktKey) -> Option<(u8, u64)> {
        if let Some(&(seq, s1, rid)) = self.pos(k).and_then(|p| self.rings.get(p)) {
            if s1 != 0 && seq == k.pkt_seq {
                return Some((s1 - 1, rid));
            }
        }
        self.spill.get(k).copied()
    }

    /// Insert, returning the key's previous value.
    pub(super) fn insert(&mut self, k: PktKey, v: (u8, u64)) -> Option<(u8, u64)> {
        let pos = match self.pos(&k) {
            Some(p) => Some(p),
            None if self.at.len() < RECENT_SESSIONS_MAX => {
                let r = self.at.len() as u32;
                self.rings
                    .resize(self.rings.len() + RECENT_SLOTS, (0, 0, 0));
                self.at.insert(k.session, r);
                self.pos(&k)
            }
            None => None,
        };
        if let Some(e) = pos.and_then(|p| self.rings.get_mut(p)) {
            if e.1 != 0 && e.0 == k.pkt_seq {
                let old = (e.1 - 1, e.2);
                *e = (k.pkt_seq, v.0.wrapping_add(1), v.1);
                return Some(old);
            }
            if e.1 == 0 && v.0 < u8::MAX {
                let old = if self.spill.is_empty() {
                    None
                } else {
                    self.spill.remove(&k)
                };
                *e = (k.pkt_seq, v.0 + 1, v.1);
                return old;
            }
        }
        self.spill.insert(k, v)
    }

    /// Remove `k` if its value is `v`; true if it was.
    pub(super) fn remove_if(&mut self, k: &PktKey, v: (u8, u64)) -> bool {
        if let Some(e) = self.pos(k).and_then(|p| self.rings.get_mut(p)) {
            if e.1 != 0 && e.0 == k.pkt_seq {
                let hit = (e.1 - 1, e.2) == v;
                if hit {
                    *e = (0, 0, 0);
                }
                return hit;
            }
        }
        if self.spill.get(k) == Some(&v) {
            self.spill.remove(k);
            return true;
        }
        false
    }

    pub(super) fn contains_key(&self, k: &PktKey) -> bool {
        self.get(k).is_some()
    }

    pub(super) fn reserve(&mut self, n: usize) {
        self.spill.reserve(n / 16);
        self.rings.reserve(PREFAULT_SESSIONS * RECENT_SLOTS);
        self.at.reserve(PREFAULT_SESSIONS);
    }
}

/// A payload's slot and the bytes it keeps: at most REQ_MAX_LEN (a longer payload never gets
/// here, `Request::parse` refused it).
pub(super) fn stored_of<B: std::ops::Deref<Target = [u8]>>(p: &Payload<B>) -> (Stored, &[u8]) {
    let b: &[u8] = &p.bytes;
    let b = &b[..b.len().min(REQ_MAX_LEN)];
    let m = Stored {
        full: p.full,
        count: p.count,
        len: b.len() as u8,
        origin: p.origin,
        t: p.t,
        gen: p.gen,
    };
    (m, b)
}

/// A free slot of the store holding `m` and the bytes `b` (the store's fields apart, so a map
/// entry can stay borrowed).
pub(super) fn alloc_slot(
    free: &mut Vec<u32>,
    slots: &mut Vec<Option<Stored>>,
    bufs: &mut Vec<[u8; REQ_MAX_LEN]>,
    m: Stored,
    b: &[u8],
) -> u32 {
    match free.pop() {
        Some(i) => {
            slots[i as usize] = Some(m);
            bufs[i as usize][..b.len()].copy_from_slice(b);
            i
        }
        None => {
            slots.push(Some(m));
            let mut buf = [0; REQ_MAX_LEN];
            buf[..b.len()].copy_from_slice(b);
            bufs.push(buf);
            (slots.len() - 1) as u32
        }
    }
}

impl Store {
    /// The slot of `k`'s first copy.
    pub(super) fn primary(&self, k: &PktKey) -> Option<u32> {
        match self.recent.get(k) {
            Some(i) => Some(i),
            None => self.map.get(k).copied(),
        }
    }

    pub(super) fn slot(&self, i: u32) -> Option<PayloadRef<'_>> {
        let i = i as usize;
        let m = self.slots.get(i)?.as_ref()?;
        Some(PayloadRef {
            m,
            bytes: self.bufs.get(i)?.get(..m.len as usize)?,
        })
    }

    /// `k`'s first copy.
    pub(super) fn get(&self, k: &PktKey) -> Option<PayloadRef<'_>> {
        self.slot(self.primary(k)?)
    }

    /// Every copy of `k`, the first one first.
    pub(super) fn copies<'a>(
        &'a self,
        k: &PktKey,
    ) -> impl Iterator<Item = (u32, PayloadRef<'a>)> + 'a {
        let first = self.primary(k);
        let more = if self.extra.is_empty() {
            None
        } else {
            self.extra.get(k)
        };
        first
            .into_iter()
            .chain(more.into_iter().flatten().copied())
            .filter_map(|i| Some((i, self.slot(i)?)))
    }

    /// The copy of `k` whose 8-byte hash is `h` (07 §5.4: the join's key is the record's
    /// `pkt_hash` and its `(session, pkt_seq)`).
    pub(super) fn get_hashed(&self, k: &PktKey, h: u64) -> Option<PayloadRef<'_>> {
        let p = self.get(k)?;
        if pkt_hash_of(&p.full) == h {
            return Some(p);
        }
        self.copies(k)
            .skip(1)
            .find(|(_, q)| pkt_hash_of(&q.full) == h)
            .map(|(_, q)| q)
    }

    /// The copy of `k` whose full hash is `full`.
    pub(super) fn get_full(&self, k: &PktKey, full: &Hash) -> Option<PayloadRef<'_>> {
        self.copies(k)
            .find(|(_, q)| q.full == *full)
            .map(|(_, q)| q)
    }

    /// The copy a record of `k` reads: the one with its hash once it has one, else the first.
    pub(super) fn get_for(&self, k: &PktKey, h: Option<u64>) -> Option<PayloadRef<'_>> {
        match h {
            Some(h) => self.get_hashed(k, h),
            None => self.get(k),
        }
    }

    pub(super) fn len(&self) -> usize {
        self.map.len() + self.n_extra
    }

    /// A free slot holding `m` and the bytes `b`.
    pub(super) fn alloc(&mut self, m: Stored, b: &[u8]) -> u32 {
        alloc_slot(&mut self.free, &mut self.slots, &mut self.bufs, m, b)
    }

    /// Another distinct copy of `k`, beside its first.
    pub(super) fn insert_extra(&mut self, k: PktKey, p: Payload<&[u8]>) {
        let (m, b) = stored_of(&p);
        self.bytes += b.len();
        let i = self.alloc(m, b);
        self.extra.entry(k).or_default().push(i);
        self.n_extra += 1;
    }

    /// Overwrite slot `i` (a copy of some key) with `p`, its index entries kept.
    pub(super) fn replace(&mut self, i: u32, p: Payload<&[u8]>) {
        let (m, b) = stored_of(&p);
        if let Some(old) = self.slots.get_mut(i as usize).and_then(|s| s.replace(m)) {
            self.bytes -= old.len as usize;
        }
        self.bytes += b.len();
        if let Some(buf) = self.bufs.get_mut(i as usize) {
            buf[..b.len()].copy_from_slice(b);
        }
    }

    /// Store `p` as `k`'s payload (replacing any).
    pub(super) fn insert<B: std::ops::Deref<Target = [u8]>>(&mut self, k: PktKey, p: Payload<B>) {
        let (m, b) = stored_of(&p);
        self.bytes += b.len();
        // One hash of the key (an entry, not a get then an insert).
        let e = match self.map.entry(k) {
            std::collections::hash_map::Entry::Occupied(e) => {
                let i = *e.get() as usize;
                if let Some(old) = self.slots[i].replace(m) {
                    self.bytes -= old.len as usize;
                }
                self.bufs[i][..b.len()].copy_from_slice(b);
                return;
            }
            std::collections::hash_map::Entry::Vacant(e) => e,
        };
        let i = alloc_slot(&mut self.free, &mut self.slots, &mut self.bufs, m, b);
        e.insert(i);
        self.recent.put(&k, i);
    }

    /// Take slot `i`, a copy of `k`, out of the store; the first extra copy of `k` becomes its
    /// first when `i` was.
    pub(super) fn remove_slot(&mut self, k: &PktKey, i: u32) -> Option<Payload> {
        if self.primary(k) == Some(i) {
            self.map.remove(k);
            self.recent.clear(k, i);
            if let Some(v) = self.extra.get_mut(k) {
                let j = v.remove(0);
                if v.is_empty() {
                    self.extra.remove(k);
                }
                self.n_extra -= 1;
                self.map.insert(*k, j);
                self.recent.put(k, j);
            }
        } else {
            let v = self.extra.get_mut(k)?;
            let at = v.iter().position(|&j| j == i)?;
            v.remove(at);
            if v.is_empty() {
                self.extra.remove(k);
            }
            self.n_extra -= 1;
        }
        let m = self.slots.get_mut(i as usize)?.take()?;
        self.free.push(i);
        self.bytes -= m.len as usize;
        Some(Payload {
            bytes: PktBuf {
                len: m.len,
                buf: *self.bufs.get(i as usize)?,
            },
            full: m.full,
            count: m.count,
            origin: m.origin,
            t: m.t,
            gen: m.gen,
        })
    }

    /// Take `k`'s first copy out of the store (its next copy, if any, becomes the first).
    #[cfg(test)]
    pub(super) fn remove(&mut self, k: &PktKey) -> Option<Payload> {
        let i = self.primary(k)?;
        self.remove_slot(k, i)
    }

    /// Take every copy of `k` out of the store.
    pub(super) fn remove_all(&mut self, k: &PktKey) {
        while let Some(i) = self.primary(k) {
            if self.remove_slot(k, i).is_none() {
                break;
            }
        }
    }

    /// The slot of the copy of `k` stored as generation `gen`.
    pub(super) fn slot_of_gen(&self, k: &PktKey, gen: u64) -> Option<u32> {
        self.copies(k).find(|(_, p)| p.gen == gen).map(|(i, _)| i)
    }

    /// Pop the oldest live entry (stale order entries of replaced payloads are skipped).
    pub(super) fn pop_oldest(&mut self) -> Option<Payload> {
        while let Some((k, gen)) = self.order.pop_front() {
            if let Some(i) = self.slot_of_gen(&k, gen) {
                return self.remove_slot(&k, i);
            }
        }
        None
    }

    /// The oldest live entry's key and time.
    pub(super) fn oldest(&mut self) -> Option<(PktKey, u64)> {
        while let Some(&(k, gen)) = self.order.front() {
            match self.slot_of_gen(&k, gen).and_then(|i| self.slot(i)) {
                Some(p) => return Some((k, p.t)),
                None => {
                    self.order.pop_front();
                }
            }
        }
        None
    }

    /// Room for `n` payloads before any grows (startup work: no page faults on the hot path).
    pub(super) fn reserve(&mut self, n: usize) {
        self.map.reserve(n);
        self.slots.reserve(n);
        self.bufs.reserve(n);
        self.order.reserve(n);
        self.recent.rings.reserve(PREFAULT_SESSIONS * RECENT_SLOTS);
        self.recent.at.reserve(PREFAULT_SESSIONS);
    }
}

impl DataSide {
    /// One packet fetched from a peer replica or the sequencer (07 §5.5), checked like a pushed
    /// one: it must answer an unresolved record and match what that record knows.
    pub fn on_fetched(
        &mut self,
        src: Source,
        pkt: &[u8],
        now: u64,
        out: &mut impl DataOut,
    ) -> Result<RecState, PktRefused> {
        self.ingest(src, pkt, now, out)
    }

    /// Parse, hash, store and join one packet. Returns the state of its newest record (or
    /// `Missing` when no record has its key yet).
    pub(super) fn ingest(
        &mut self,
        src: Source,
        pkt: &[u8],
        now: u64,
        out: &mut impl DataOut,
    ) -> Result<RecState, PktRefused> {
        self.c.pkts += 1;
        let r = self.ingest_inner(src, pkt, now, out);
        if let Err(e) = r {
            self.c.pkts_refused[e.index()] += 1;
        }
        r
    }

    pub(super) fn ingest_inner(
        &mut self,
        src: Source,
        pkt: &[u8],
        now: u64,
        out: &mut impl DataOut,
    ) -> Result<RecState, PktRefused> {
        let req = Request::parse(pkt).map_err(PktRefused::Malformed)?;
        if req.book() != self.cfg.book {
            return Err(PktRefused::OtherBook);
        }
        let key = PktKey {
            session: req.session(),
            pkt_seq: req.pkt_seq(),
        };
        // 07 §5.4: the replica's own full hash, never a data box's.
        let full = req.full_hash();
        if pkt.len() > REQ_MAX_LEN {
            // `Request::parse` refuses it first; the store's slots hold REQ_MAX_LEN bytes.
            return Err(PktRefused::Malformed(ReqReject::BadLen));
        }
        // Borrowed: the bytes are copied once, into the store's slot (a PktBuf here zeroed and
        // moved 256 bytes per packet, ~8 % of the front at the peak mix).
        let p = Payload {
            bytes: pkt,
            full,
            count: req.count() as u8,
            origin: src,
            t: now,
            gen: 0,
        };
        let head = self.index.get(&key);
        if let Some(old) = self.store.get(&key) {
            let (old_full, old_origin) = (old.full, old.origin);
            if self.store.get_full(&key, &full).is_some() {
                return Err(PktRefused::Duplicate);
            }
            let ph = pkt_hash_of(&full);
            if self.store.get_hashed(&key, ph).is_some() {
                // The same 8-byte hash, another full hash (07 §5.6 row 2): only the
                // sequencer's copy settles it.
                if src != Source::Seq {
                    return Err(PktRefused::Duplicate);
                }
                return self.settle(head, p, now, out);
            }
            // Another packet under this key (a conflicting duplicate the box logged, or the
            // client's two copies differ, 07 §5.6 row 1): kept beside the first, so every
            // record of the key finds the copy with its own hash.
            if let Source::Peer(_) | Source::Seq = src {
                // A fetched copy answers an unresolved record with its hash (07 §5.5).
                if !self.wants(head, src, p.count, &full, true) {
                    return Err(if self.wants_any(head, src) {
                        PktRefused::Wrong
                    } else {
                        PktRefused::Unsolicited
                    });
                }
                self.c.fetched_ok += 1;
            }
            // Unasked copies from a data box are bounded per key; a copy a record asked for
            // is bounded by the records (one each).
            let unasked = matches!(src, Source::Box(_) | Source::Journal)
                && !self.wants(head, Source::Seq, p.count, &full, true);
            if unasked && self.store.extra.get(&key).map_or(0, Vec::len) >= EXTRA_COPIES_MAX {
                self.c.copies_refused += 1;
                return Err(PktRefused::Duplicate);
            }
            if src == Source::Seq && matches!(old_origin, Source::Box(_)) {
                // The sequencer's copy differs from the data box's: the client's evidence.
                let mut first = [0u8; REQ_MAX_LEN];
                let n = self.store.get(&key).map_or(0, |o| {
                    first[..o.bytes.len()].copy_from_slice(o.bytes);
                    o.bytes.len()
                });
                let e = CopyMismatch {
                    session: key.session,
                    pkt_seq: key.pkt_seq,
                    seq_hash: full,
                    data_hash: old_full,
                };
                self.c.copy_mismatch += 1;
                out.copy_mismatch(&e, pkt, &first[..n]);
            } else if src == Source::Seq && matches!(old_origin, Source::Peer(_)) {
                // A wrong copy from a peer: not the client's, no evidence.
                self.c.peer_copy_replaced += 1;
            }
            self.insert_copy(key, p, true);
            return Ok(self.join_from(head, now, out));
        }
        if let Source::Peer(_) | Source::Seq = src {
            // A fetched packet answers an unresolved record and passes its checks (07 §5.5).
            if head.is_none() {
                return Err(PktRefused::Unsolicited);
            }
            if !self.wants(head, src, p.count, &full, false) {
                return Err(if self.wants_any(head, src) {
                    PktRefused::Wrong
                } else {
                    PktRefused::Unsolicited
                });
            }
            self.c.fetched_ok += 1;
        }
        self.insert(key, p);
        // The index is as it was looked up above (storing a payload never changes it).
        Ok(self.join_from(head, now, out))
    }

    pub(super) fn insert(&mut self, key: PktKey, p: Payload<&[u8]>) {
        self.insert_copy(key, p, false);
    }

    /// Store `p` as `key`'s first copy, or (`extra`) as another distinct copy beside it.
    pub(super) fn insert_copy(&mut self, key: PktKey, mut p: Payload<&[u8]>, extra: bool) {
        let len = p.bytes.len();
        while self.store.len() > 0
            && (self.store.len() >= self.cfg.store_max_pkts
                || self.store.bytes + len > self.cfg.store_max_bytes)
        {
            if self.store.pop_oldest().is_none() {
                break;
            }
            self.c.evicted_room += 1;
        }
        p.gen = self.store.next_gen;
        self.store.next_gen += 1;
        self.store.order.push_back((key, p.gen));
        if extra && self.store.get(&key).is_some() {
            self.store.insert_extra(key, p);
            self.c.copies_extra += 1;
        } else {
            self.store.insert(key, p);
        }
        self.c.pkts_stored += 1;
        let hi = self.hi_seq.entry(key.session).or_insert(0);
        *hi = (*hi).max(key.pkt_seq);
    }
}
