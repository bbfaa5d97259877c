//! The join (07 §5.4): records from the decoder resolved against stored payloads by key, 8-byte
//! hash and count; each block's payloads and `data_root` (07 §6.1, §6.4) for the verdict.

use super::*;

#[derive(Debug, Clone)]
pub(super) struct Rec {
    /// When its ORDER frame came (07 §9.3 item 4: REP_SEAL_DATA_WAIT_MS runs from there).
    pub(super) at: u64,
    pub(super) key: PktKey,
    /// The record's lane and first LaneSeq (where replay queues it, for [`DataOut::resolved`]).
    pub(super) first_lane_seq: u64,
    pub(super) lane: u8,
    pub(super) count: u8,
    pub(super) advance: bool,
    pub(super) pkt_hash: Option<u64>,
    pub(super) state: RecState,
    /// The full hash of the joined payload (tentative while unhashed).
    pub(super) full: Option<Hash>,
    /// Fetch sources asked: 0 none, 1 home, 2 peer, 3.. the sequencer.
    pub(super) stage: u8,
    /// An ask of this record is in flight (counted in [`FETCH_IN_FLIGHT_MAX`]'s window).
    pub(super) asking: bool,
    /// The HashList entry this record's full hash must equal (07 §5.6 row 2).
    pub(super) expect: Option<Box<Hash>>,
    /// The previous live record of the same key in this substream.
    pub(super) prev: Option<u64>,
    /// When its armed timer is due (older timer entries are stale).
    pub(super) due: u64,
}

#[derive(Debug, Default)]
pub(super) struct Sub {
    /// Record id of `recs[0]`.
    pub(super) base: u64,
    pub(super) recs: VecDeque<Rec>,
    /// (height, end record id) per BlockMark, oldest first.
    pub(super) marks: VecDeque<(u64, u64)>,
    pub(super) last_height: Option<u64>,
}

impl Sub {
    pub(super) fn get(&self, rid: u64) -> Option<&Rec> {
        self.recs
            .get(usize::try_from(rid.checked_sub(self.base)?).ok()?)
    }
    pub(super) fn get_mut(&mut self, rid: u64) -> Option<&mut Rec> {
        self.recs
            .get_mut(usize::try_from(rid.checked_sub(self.base)?).ok()?)
    }
    pub(super) fn end(&self) -> u64 {
        self.base + self.recs.len() as u64
    }
    /// Record ids of block `height`: `[start, end)`.
    pub(super) fn range(&self, height: u64) -> Option<(u64, u64)> {
        let mut start = self.base;
        for &(h, end) in &self.marks {
            if h == height {
                return Some((start, end));
            }
            start = end;
        }
        None
    }
}

impl DataSide {
    /// The records of a key, newest first, from its index entry.
    pub(super) fn chain(&self, head: Option<(u8, u64)>) -> impl Iterator<Item = &Rec> + '_ {
        let mut cur = head;
        std::iter::from_fn(move || {
            let (s, rid) = cur?;
            let r = self.subs[s as usize].get(rid)?;
            cur = r.prev.map(|p| (s, p));
            Some(r)
        })
    }

    /// Whether a record of the key still waits for a fetched copy from `src`: missing or
    /// unavailable, or in mismatch when `src` is the sequencer (only its copy settles one, 07
    /// §5.6).
    pub(super) fn waits_for(r: &Rec, src: Source) -> bool {
        match r.state {
            RecState::Missing | RecState::Unavailable => true,
            RecState::Mismatch => src == Source::Seq,
            _ => false,
        }
    }

    /// Whether any record of the key waits for a fetched copy from `src`.
    pub(super) fn wants_any(&self, head: Option<(u8, u64)>, src: Source) -> bool {
        self.chain(head).any(|r| Self::waits_for(r, src))
    }

    /// Whether a record of the key that waits for a copy from `src` takes this one (its count and
    /// hash judged; `hashed`: only by a record whose HashRun is in and matches).
    pub(super) fn wants(
        &self,
        head: Option<(u8, u64)>,
        src: Source,
        count: u8,
        full: &Hash,
        hashed: bool,
    ) -> bool {
        self.chain(head).any(|r| {
            Self::waits_for(r, src)
                && match judge(r, count, full) {
                    RecState::Resolved => true,
                    RecState::Unhashed => !hashed && r.state != RecState::Mismatch,
                    _ => false,
                }
        })
    }

    /// The sequencer's copy of a key whose stored copy has the same 8-byte hash and another
    /// full hash (07 §5.6 row 2): canonical if a record in mismatch takes it, then
    /// `CopyMismatch` evidence when the replaced copy was the data box's.
    pub(super) fn settle(
        &mut self,
        head: Option<(u8, u64)>,
        p: Payload<&[u8]>,
        now: u64,
        out: &mut impl DataOut,
    ) -> Result<RecState, PktRefused> {
        if !self.wants_any(head, Source::Seq) {
            return Err(PktRefused::Unsolicited);
        }
        if !self.wants(head, Source::Seq, p.count, &p.full, true) {
            return Err(PktRefused::Wrong);
        }
        let req = Request::parse(p.bytes).map_err(PktRefused::Malformed)?;
        let key = PktKey {
            session: req.session(),
            pkt_seq: req.pkt_seq(),
        };
        let ph = pkt_hash_of(&p.full);
        let Some((i, old)) = self
            .store
            .copies(&key)
            .find(|(_, q)| pkt_hash_of(&q.full) == ph)
            .map(|(i, q)| (i, (q.full, q.origin, q.bytes.to_vec())))
        else {
            return Err(PktRefused::Unsolicited);
        };
        let (old_full, old_origin, old_bytes) = old;
        if matches!(old_origin, Source::Box(_)) {
            let e = CopyMismatch {
                session: key.session,
                pkt_seq: key.pkt_seq,
                seq_hash: p.full,
                data_hash: old_full,
            };
            self.c.copy_mismatch += 1;
            out.copy_mismatch(&e, p.bytes, &old_bytes);
        } else {
            self.c.peer_copy_replaced += 1;
        }
        self.c.fetched_ok += 1;
        let mut p = p;
        p.gen = self.store.next_gen;
        self.store.next_gen += 1;
        self.store.order.push_back((key, p.gen));
        self.store.replace(i, p);
        Ok(self.join_key(key, now, out))
    }

    /// Join every live record of `key` with the stored payload. Returns the newest's state.
    pub(super) fn join_key(&mut self, key: PktKey, now: u64, out: &mut impl DataOut) -> RecState {
        self.join_from(self.index.get(&key), now, out)
    }

    /// [`Self::join_key`] from the key's newest record as the index gave it.
    pub(super) fn join_from(
        &mut self,
        head: Option<(u8, u64)>,
        now: u64,
        out: &mut impl DataOut,
    ) -> RecState {
        let mut cur = head;
        let mut newest = None;
        while let Some((s, rid)) = cur {
            let st = self.join_one(s, rid, now, out);
            newest.get_or_insert(st);
            cur = self.subs[s as usize]
                .get(rid)
                .and_then(|r| r.prev)
                .map(|p| (s, p));
        }
        newest.unwrap_or(RecState::Missing)
    }

    /// Join one record with the stored payload of its key (07 §5.4, §5.6).
    pub(super) fn join_one(
        &mut self,
        s: u8,
        rid: u64,
        now: u64,
        out: &mut impl DataOut,
    ) -> RecState {
        let Some(r) = self.subs[s as usize].get_mut(rid) else {
            return RecState::Missing;
        };
        if matches!(
            r.state,
            RecState::Advance | RecState::Resolved | RecState::Excluded
        ) {
            return r.state;
        }
        // Of a deposed tenure's tail, or listed unavailable by a seal this replica proposed or
        // accepted: the copy waits in the store until the seal is final (`seal`), so replay
        // never runs a packet the final log may exclude (07 §9.4).
        if self.hold_from.is_some_and(|hf| rid >= hf[s as usize & 1])
            || (!self.hold.is_empty() && self.hold.binary_search(&r.key).is_ok())
        {
            self.c.held_for_seal += 1;
            return r.state;
        }
        // The copy with the record's hash; else the first, which judges as a mismatch.
        let Some(p) = self
            .store
            .get_for(&r.key, r.pkt_hash)
            .or_else(|| self.store.get(&r.key))
        else {
            return r.state;
        };
        let was = r.state;
        let st = judge(r, p.count, &p.full);
        match st {
            RecState::Mismatch => {
                if was != RecState::Mismatch {
                    if p.count != r.count && r.count != PKT_LEVEL_COUNT {
                        self.c.mismatch_count += 1;
                    } else {
                        self.c.mismatch_hash += 1;
                    }
                    r.state = RecState::Mismatch;
                    // 07 §5.6: straight to the sequencer's copy (source 3).
                    r.stage = r.stage.max(2);
                    r.full = Some(p.full);
                    self.fire(s, rid, now, out);
                }
            }
            RecState::Resolved => {
                Self::answered(&mut self.in_flight, r);
                r.state = RecState::Resolved;
                r.full = Some(p.full);
                self.c.resolved += 1;
                if r.pkt_hash.is_some() {
                    out.resolved(r.lane, r.first_lane_seq, p.bytes);
                }
            }
            _ => {
                // Unhashed: a copy is here; the ask is answered.
                Self::answered(&mut self.in_flight, r);
                r.state = st;
                r.full = Some(p.full);
                // A record of a sealed prefix never gets its HashRun: by key alone (07 §9.3
                // item 4), as at the seal.
                if rid < self.sealed_to[s as usize]
                    && Self::by_key(&self.store, &mut self.in_flight, &mut self.c, r, out)
                {
                    self.c.resolved_after_seal += 1;
                    return RecState::Resolved;
                }
            }
        }
        st
    }

    /// A decoded PacketRecord of `stream`, in O-order; `order_t` is when its ORDER frame came.
    pub fn on_record(
        &mut self,
        stream: u8,
        r: &PacketRecord,
        order_t: u64,
        out: &mut impl DataOut,
    ) -> Result<RecState, RecordRefused> {
        let res = self.record(stream, r, order_t, out);
        if res.is_err() {
            self.c.records_refused += 1;
        }
        res
    }

    pub(super) fn record(
        &mut self,
        stream: u8,
        r: &PacketRecord,
        order_t: u64,
        out: &mut impl DataOut,
    ) -> Result<RecState, RecordRefused> {
        if stream >= self.cfg.n_streams {
            return Err(RecordRefused::BadStream);
        }
        if self.live_records >= self.cfg.records_max {
            return Err(RecordRefused::Full);
        }
        self.c.records += 1;
        self.live_records += 1;
        let key = PktKey {
            session: r.session,
            pkt_seq: r.pkt_seq,
        };
        let advance = r.is_advance();
        let sub = &mut self.subs[stream as usize];
        let rid = sub.end();
        let mut rec = Rec {
            at: order_t,
            key,
            first_lane_seq: r.first_lane_seq,
            lane: r.lane,
            count: r.count,
            advance,
            pkt_hash: None,
            state: if advance {
                RecState::Advance
            } else {
                RecState::Missing
            },
            full: None,
            stage: 0,
            asking: false,
            expect: None,
            prev: None,
            due: order_t.saturating_add(self.cfg.timing.wait_ns),
        };
        if advance {
            self.c.records_advance += 1;
            sub.recs.push_back(rec);
            return Ok(RecState::Advance);
        }
        let due = rec.due;
        if let Some((s, prev)) = self.index.insert(key, (stream, rid)) {
            if s == stream && sub.get(prev).is_some() {
                rec.prev = Some(prev);
                self.c.dup_key_records += 1;
            }
        }
        sub.recs.push_back(rec);
        if self.arms.back().is_none_or(|&(d, _, _)| d <= due) {
            self.arms.push_back((due, stream, rid));
        } else {
            self.timers.push(Reverse((due, stream, rid)));
        }
        Ok(self.join_one(stream, rid, order_t, out))
    }

    /// A HashRun's `pkt_hash` for the oldest unhashed record of `key` in `stream`.
    pub fn on_hash(
        &mut self,
        stream: u8,
        key: PktKey,
        pkt_hash: u64,
        now: u64,
        out: &mut impl DataOut,
    ) -> Result<RecState, RecordRefused> {
        let res = self.hash(stream, key, pkt_hash, now, out);
        match res {
            Ok(_) => self.c.hashes += 1,
            Err(_) => self.c.hashes_refused += 1,
        }
        res
    }

    pub(super) fn hash(
        &mut self,
        stream: u8,
        key: PktKey,
        pkt_hash: u64,
        now: u64,
        out: &mut impl DataOut,
    ) -> Result<RecState, RecordRefused> {
        if stream >= self.cfg.n_streams {
            return Err(RecordRefused::BadStream);
        }
        let sub = &mut self.subs[stream as usize];
        let mut cur = match self.index.get(&key) {
            Some((s, rid)) if s == stream => Some(rid),
            _ => None,
        };
        let mut target = None;
        while let Some(rid) = cur {
            let Some(r) = sub.get(rid) else { break };
            if r.pkt_hash.is_none() {
                target = Some(rid);
            }
            cur = r.prev;
        }
        let rid = target.ok_or(RecordRefused::UnknownRecord)?;
        if let Some(r) = sub.get_mut(rid) {
            r.pkt_hash = Some(pkt_hash);
        }
        Ok(self.join_one(stream, rid, now, out))
    }

    /// `stream`'s BlockMark of `height`: its records since the last mark are block `height`'s.
    pub fn on_mark(&mut self, stream: u8, height: u64) -> Result<(), RecordRefused> {
        if stream >= self.cfg.n_streams {
            return Err(RecordRefused::BadStream);
        }
        let sub = &mut self.subs[stream as usize];
        if sub.last_height.is_some_and(|h| height <= h) {
            return Err(RecordRefused::HeightOrder);
        }
        sub.last_height = Some(height);
        let end = sub.end();
        sub.marks.push_back((height, end));
        Ok(())
    }

    /// The state of the newest record of `key`.
    pub fn rec_state(&self, key: PktKey) -> Option<RecState> {
        let (s, rid) = self.index.get(&key)?;
        self.subs[s as usize].get(rid).map(|r| r.state)
    }

    /// Forget blocks up to `height` (finalized and journaled): their records, marks and lists.
    pub fn release_through(&mut self, height: u64) {
        for (si, sub) in self.subs.iter_mut().enumerate() {
            while let Some(&(h, end)) = sub.marks.front() {
                if h > height {
                    break;
                }
                sub.marks.pop_front();
                while sub.base < end {
                    let Some(mut r) = sub.recs.pop_front() else {
                        break;
                    };
                    Self::answered(&mut self.in_flight, &mut r);
                    let here = (si as u8, sub.base);
                    if self.index.remove_if(&r.key, here) && self.store.pinned.remove(&r.key) {
                        self.store.remove_all(&r.key);
                        self.c.evicted_age += 1;
                    }
                    sub.base += 1;
                    self.live_records -= 1;
                }
            }
        }
        self.lists = self.lists.split_off(&(height.saturating_add(1)));
        self.root_ok = self.root_ok.split_off(&(height.saturating_add(1)));
    }

    /// Record ranges of block `height` on every substream, or `None` until all are marked.
    pub(super) fn ranges(&self, height: u64) -> Option<[(u64, u64); 2]> {
        let mut r = [(0, 0); 2];
        let ns = self.cfg.n_streams as usize;
        for (x, sub) in r.iter_mut().zip(&self.subs).take(ns) {
            *x = sub.range(height)?;
        }
        Some(r)
    }

    /// Whether every PacketRecord of block `height` is resolved (07 §6.4 item 3).
    pub fn block_payloads(&self, height: u64) -> BlockPayloads {
        let Some(ranges) = self.ranges(height) else {
            return BlockPayloads::Unknown;
        };
        let (mut missing, mut unhashed, mut mismatch) = (0, 0, 0);
        for (s, &(a, z)) in ranges.iter().enumerate().take(self.cfg.n_streams as usize) {
            for rid in a..z {
                match self.subs[s].get(rid).map(|r| r.state) {
                    Some(RecState::Advance | RecState::Resolved | RecState::Excluded) => {}
                    Some(RecState::Unhashed) => unhashed += 1,
                    Some(RecState::Mismatch) => mismatch += 1,
                    _ => missing += 1,
                }
            }
        }
        if missing + unhashed + mismatch == 0 {
            BlockPayloads::Ready
        } else {
            BlockPayloads::Pending {
                missing,
                unhashed,
                mismatch,
            }
        }
    }

    /// Block `height`'s resolved PacketRecords in O-order, A then B, Advance records left out:
    /// `f(pkt_hash, packet bytes)` each (the journal's pkt_hash list and data section, 07
    /// §8.2). False, with nothing called, unless every record is resolved and stored.
    pub fn block_packets(&self, height: u64, mut f: impl FnMut(u64, &[u8])) -> bool {
        if self.block_payloads(height) != BlockPayloads::Ready {
            return false;
        }
        let Some(ranges) = self.ranges(height) else {
            return false;
        };
        let ns = self.cfg.n_streams as usize;
        // Check first, then call: all or nothing.
        for (s, &(a, z)) in ranges.iter().enumerate().take(ns) {
            for rid in a..z {
                match self.subs[s].get(rid) {
                    Some(r) if r.advance || r.state == RecState::Excluded => {}
                    // The stored copy must be the one this record resolved to.
                    Some(r)
                        if r.pkt_hash.is_some()
                            && r.full
                                .is_some_and(|f| self.store.get_full(&r.key, &f).is_some()) => {}
                    _ => return false,
                }
            }
        }
        for (s, &(a, z)) in ranges.iter().enumerate().take(ns) {
            for rid in a..z {
                if let Some(r) = self.subs[s]
                    .get(rid)
                    .filter(|r| !r.advance && r.state != RecState::Excluded)
                {
                    let p = r.full.and_then(|full| self.store.get_full(&r.key, &full));
                    if let (Some(h), Some(p)) = (r.pkt_hash, p) {
                        f(h, p.bytes);
                    }
                }
            }
        }
        true
    }

    /// Block `height`'s unavailable list (07 §9.4, §8.2: the keys of its records a final seal
    /// excluded), ascending; empty for every block but a seal block with exclusions.
    pub fn block_unavail(&self, height: u64) -> Vec<PktKey> {
        // Nothing was ever excluded here: no walk over the block's records.
        if self.c.excluded == 0 {
            return Vec::new();
        }
        let Some(ranges) = self.ranges(height) else {
            return Vec::new();
        };
        let mut keys: Vec<PktKey> = ranges
            .iter()
            .enumerate()
            .take(self.cfg.n_streams as usize)
            .flat_map(|(s, &(a, z))| (a..z).filter_map(move |rid| self.subs[s].get(rid)))
            .filter(|r| r.state == RecState::Excluded)
            .map(|r| r.key)
            .collect();
        keys.sort_unstable();
        keys.dedup();
        keys
    }

    /// The open block's `data_root` (07 §9.4: the seal block is the records after each
    /// substream's last BlockMark, here `height − 1`'s), as §6.1 over every record decoded so
    /// far; `None` while one is unresolved, or when a substream's last mark is not `height − 1`.
    /// (The seal's unavailable packets, 32 zero bytes each, are not built: such a seal waits.)
    pub fn open_data_root(&self, height: u64) -> Option<BlockDataRoot> {
        let ns = self.cfg.n_streams as usize;
        let mut halves = [empty_root(); 2];
        for (s, sub) in self.subs.iter().enumerate().take(ns) {
            // No mark yet this tenure: every record is the open block's.
            let last = sub.marks.back().map(|m| m.0).or(sub.last_height);
            if last.is_some_and(|h| h + 1 != height) {
                return None;
            }
            let start = sub.marks.back().map_or(sub.base, |m| m.1);
            halves[s] = self.half_root(sub, start, false)?;
        }
        Some(BlockDataRoot {
            data_root: data_root(&halves[0], &halves[1]),
            halves,
        })
    }

    /// One substream's half of a `data_root` (07 §6.1) over its records from `start` to the
    /// newest: every one resolved, or with `by_key` an unhashed one by the one distinct copy
    /// its key holds (§9.3 item 4); `None` otherwise.
    fn half_root(&self, sub: &Sub, start: u64, by_key: bool) -> Option<Hash> {
        let mut d = DataRootHasher::default();
        for rid in start..sub.end() {
            let r = sub.get(rid)?;
            match r.state {
                RecState::Advance => {}
                RecState::Resolved => d.push(&r.full?),
                RecState::Unhashed if by_key => {
                    let mut copies = self.store.copies(&r.key).map(|(_, p)| p.m.full);
                    let full = copies.next()?;
                    if copies.any(|f| f != full) {
                        return None;
                    }
                    d.push(&full);
                }
                _ => return None,
            }
        }
        Some(d.finish())
    }

    /// The seal is final (07 §9.4): every record after `BlockMark(h_star)` is the seal block
    /// `hs`'s, whatever marks the dead tenure wrote after `h_star`; the next tenure's blocks
    /// follow from `hs + 1`. The records of the seal's `unavail` keys are excluded first (replay
    /// runs them without a payload, [`DataOut::excluded`]); then the records the prefix left
    /// unhashed are resolved by key alone ([`DataSide::resolve_unhashed`]), and copies held back
    /// for a seal's list that this one does not name are joined. Returns how many were resolved
    /// by key.
    pub fn seal(
        &mut self,
        h_star: u64,
        hs: u64,
        unavail: &[PktKey],
        now: u64,
        out: &mut impl DataOut,
    ) -> u64 {
        let ns = self.cfg.n_streams as usize;
        if !unavail.is_empty() {
            for s in 0..ns {
                let Some(start) = self.tail_start(s, h_star) else {
                    continue;
                };
                let sub = &mut self.subs[s];
                for rid in start..sub.end() {
                    let Some(r) = sub.get_mut(rid) else {
                        continue;
                    };
                    if r.advance
                        || r.state == RecState::Excluded
                        || unavail.binary_search(&r.key).is_err()
                    {
                        continue;
                    }
                    Self::answered(&mut self.in_flight, r);
                    r.state = RecState::Excluded;
                    r.full = None;
                    self.c.excluded += 1;
                    // Replay had run it already (resolved here before this replica deposed
                    // the tenure, and a final seal a quorum checked without it): its replay
                    // ran what the final log excludes.
                    if !out.excluded(r.lane, r.first_lane_seq) {
                        self.c.excluded_late += 1;
                    }
                }
            }
        }
        let held = std::mem::take(&mut self.hold);
        let held_from = self.hold_from.take();
        let n = self.resolve_unhashed(out);
        for (s, sub) in self.subs.iter_mut().enumerate().take(ns) {
            while sub.marks.back().is_some_and(|m| m.0 > h_star) {
                sub.marks.pop_back();
            }
            let end = sub.end();
            sub.marks.push_back((hs, end));
            sub.last_height = Some(hs);
            // A record of the prefix whose copy comes only after this (the data box late, a
            // peer's answer) is resolved by key when it comes (`join_one`).
            self.sealed_to[s] = end;
        }
        // What waited for the seal is joined now (excluded records stay as they are).
        if let Some(hf) = held_from {
            for (s, &from) in hf.iter().enumerate().take(ns) {
                for rid in from..self.subs[s].end() {
                    self.join_one(s as u8, rid, now, out);
                }
            }
        }
        for k in held {
            if unavail.binary_search(&k).is_err() {
                self.join_key(k, now, out);
            }
        }
        n
    }

    /// The tenure is deposed here (07 §9.2) and `h` is the highest height whose header it
    /// holds with its BlockMark (`H_i`, or the seal plan's `H*` once known): the records after
    /// `BlockMark(h)` are the seal's tail, which may exclude any of them (§9.3 item 4). Their
    /// copies are stored but not joined until the seal is final, so replay never runs a packet
    /// the final log excludes; the seal's own checks still see them (`tail_full`). A later call
    /// with a higher `h` joins the records of the blocks between.
    pub fn hold_tail(&mut self, h: u64, now: u64, out: &mut impl DataOut) {
        let ns = self.cfg.n_streams as usize;
        let mut from = [0u64; 2];
        for (s, x) in from.iter_mut().enumerate().take(ns) {
            *x = self.tail_start(s, h).unwrap_or_else(|| self.subs[s].end());
        }
        if let Some(old) = self.hold_from.replace(from) {
            for s in 0..ns {
                for rid in old[s]..from[s] {
                    self.join_one(s as u8, rid, now, out);
                }
            }
        }
    }

    /// The first record id after `BlockMark(h_star)` on substream `s` (the seal's tail, 07
    /// §9.4): `None` when that mark is no longer held.
    fn tail_start(&self, s: usize, h_star: u64) -> Option<u64> {
        let sub = &self.subs[s];
        match sub.marks.iter().find(|m| m.0 == h_star) {
            Some(m) => Some(m.1),
            // Every mark up to h_star released (marks are consecutive heights), or none passed
            // this tenure: the records after it start at `base`.
            None if sub
                .marks
                .front()
                .map_or(sub.last_height.is_none_or(|h| h == h_star), |m| {
                    m.0 == h_star + 1
                }) =>
            {
                Some(sub.base)
            }
            None => None,
        }
    }

    /// The tail's records (07 §9.4), `(substream, record)` each; empty when a substream's
    /// `BlockMark(h_star)` is no longer held (`None`).
    fn tail(&self, h_star: u64) -> Option<impl Iterator<Item = &Rec> + '_> {
        let ns = self.cfg.n_streams as usize;
        let mut starts = [0u64; 2];
        for (s, x) in starts.iter_mut().enumerate().take(ns) {
            *x = self.tail_start(s, h_star)?;
        }
        Some((0..ns).flat_map(move |s| {
            let sub = &self.subs[s];
            (starts[s]..sub.end()).filter_map(move |rid| sub.get(rid))
        }))
    }

    /// The full hash record `r` of a seal's tail counts with (07 §9.3 item 4): its own once
    /// resolved; else a copy held here that resolves it — the one with its HashRun's hash and
    /// its count, or, unhashed, the one distinct copy of its key. `None`: this replica cannot
    /// resolve it (or it is an Advance record or excluded).
    fn tail_full(&self, r: &Rec) -> Option<Hash> {
        match r.state {
            RecState::Resolved => r.full,
            RecState::Advance | RecState::Excluded => None,
            _ => match r.pkt_hash {
                Some(h) => self
                    .store
                    .get_for(&r.key, Some(h))
                    .filter(|p| judge(r, p.count, &p.full) == RecState::Resolved)
                    .map(|p| p.full),
                None => {
                    let mut copies = self.store.copies(&r.key).map(|(_, p)| p.m.full);
                    let full = copies.next()?;
                    if copies.any(|f| f != full) {
                        return None;
                    }
                    Some(full)
                }
            },
        }
    }

    /// The seal leader's unavailable list (07 §9.3 item 4): the keys of the tail's records it
    /// cannot resolve REP_SEAL_DATA_WAIT_MS after their ORDER frame, ascending. `Err(n)` while
    /// `n` such records are still inside their wait (the leader waits: fetches are under way);
    /// `Err(0)` when the tail is not held.
    pub fn seal_unavail(&self, h_star: u64, now: u64) -> Result<Vec<PktKey>, u64> {
        let wait = self.cfg.timing.seal_wait_ns;
        let mut list = Vec::new();
        let mut waiting = 0;
        for r in self.tail(h_star).ok_or(0u64)? {
            if r.advance || self.tail_full(r).is_some() {
                continue;
            }
            if now < r.at.saturating_add(wait) {
                waiting += 1;
            } else {
                list.push(r.key);
            }
        }
        if waiting > 0 {
            return Err(waiting);
        }
        list.sort_unstable();
        list.dedup();
        Ok(list)
    }

    /// A voter's check of a seal's unavailable list (07 §9.3 item 4): every listed key is a
    /// record of the tail, and none of them is one this replica can resolve.
    pub fn check_unavail(&self, h_star: u64, unavail: &[PktKey]) -> Result<(), UnavailRefused> {
        if unavail.is_empty() {
            return Ok(());
        }
        let tail = self.tail(h_star).ok_or(UnavailRefused::NoTail)?;
        let mut seen = vec![false; unavail.len()];
        for r in tail {
            if r.advance {
                continue;
            }
            if let Ok(i) = unavail.binary_search(&r.key) {
                if self.tail_full(r).is_some() {
                    return Err(UnavailRefused::Held(r.key));
                }
                seen[i] = true;
            }
        }
        match seen.iter().position(|&x| !x) {
            Some(i) => Err(UnavailRefused::NotInTail(unavail[i])),
            None => Ok(()),
        }
    }

    /// Hold back the copies of `keys` (a seal this replica proposed or accepted lists them
    /// unavailable) until the seal is final: replay must not run a packet the final log may
    /// exclude.
    pub fn hold_for_seal(&mut self, keys: &[PktKey]) {
        if keys.is_empty() {
            return;
        }
        self.hold.extend_from_slice(keys);
        self.hold.sort_unstable();
        self.hold.dedup();
    }

    /// What the join holds of the record of `lane` starting at `first_lane_seq`, for a log line
    /// (its state, fetch stage, hash and how many copies its key holds).
    pub fn describe(&self, lane: u8, first_lane_seq: u64) -> String {
        for (s, sub) in self.subs.iter().enumerate() {
            if let Some(r) = sub
                .recs
                .iter()
                .find(|r| r.lane == lane && r.first_lane_seq == first_lane_seq)
            {
                return format!(
                    "substream {s}: {:?}, fetch stage {}, asking {}, pkt_hash {:?}, {} cop(ies) of its key held",
                    r.state,
                    r.stage,
                    r.asking,
                    r.pkt_hash,
                    self.store.copies(&r.key).count()
                );
            }
        }
        "not held by the join".to_string()
    }

    /// 07 §9.3 item 4: each record still unhashed whose key holds one distinct copy is resolved
    /// with it (handed to replay through `out` as any resolved record); returns how many.
    pub fn resolve_unhashed(&mut self, out: &mut impl DataOut) -> u64 {
        let mut n = 0;
        for sub in self.subs.iter_mut().take(self.cfg.n_streams as usize) {
            for r in sub.recs.iter_mut() {
                if Self::by_key(&self.store, &mut self.in_flight, &mut self.c, r, out) {
                    n += 1;
                }
            }
        }
        n
    }

    /// Record `r` of a sealed prefix, still unhashed, resolved with the one distinct copy its
    /// key holds (07 §9.3 item 4); false if it is hashed, resolved, or its key holds no copy or
    /// different ones.
    fn by_key(
        store: &Store,
        in_flight: &mut u64,
        c: &mut DataCounters,
        r: &mut Rec,
        out: &mut impl DataOut,
    ) -> bool {
        if r.advance
            || r.pkt_hash.is_some()
            || matches!(r.state, RecState::Resolved | RecState::Excluded)
        {
            return false;
        }
        let mut copies = store.copies(&r.key).map(|(_, p)| p);
        let Some(p) = copies.next() else {
            return false;
        };
        if copies.any(|q| q.m.full != p.m.full) {
            return false;
        }
        Self::answered(in_flight, r);
        r.state = RecState::Resolved;
        r.full = Some(p.m.full);
        // Its hash from here on is its copy's: a later record of the key (a resend the next
        // tenure logs as a duplicate) takes the next HashRun, not this one.
        r.pkt_hash = Some(pkt_hash_of(&p.m.full));
        c.resolved += 1;
        out.resolved(r.lane, r.first_lane_seq, p.bytes);
        true
    }

    /// The seal's `data_root` (07 §9.4) over every record after `BlockMark(h_star)` on each
    /// substream, however many later marks the tail spans, as §6.1, with 32 zero bytes for each
    /// record of an `unavail` key. A record the prefix left unhashed counts with the one
    /// distinct copy its key holds (§9.3 item 4). `None` while an unlisted record cannot be
    /// resolved here, or the records after `h_star` are no longer held (released).
    pub fn tail_data_root(&self, h_star: u64, unavail: &[PktKey]) -> Option<BlockDataRoot> {
        let ns = self.cfg.n_streams as usize;
        let mut halves = [empty_root(); 2];
        for (s, half) in halves.iter_mut().enumerate().take(ns) {
            let start = self.tail_start(s, h_star)?;
            let sub = &self.subs[s];
            let mut d = DataRootHasher::default();
            for rid in start..sub.end() {
                let r = sub.get(rid)?;
                if r.advance {
                    continue;
                }
                if r.state == RecState::Excluded || unavail.binary_search(&r.key).is_ok() {
                    d.push(&[0; 32]);
                } else {
                    d.push(&self.tail_full(r)?);
                }
            }
            *half = d.finish();
        }
        Some(BlockDataRoot {
            data_root: data_root(&halves[0], &halves[1]),
            halves,
        })
    }

    /// Block `height`'s `data_root` from the resolved payloads' full hashes in O-order, per
    /// substream (07 §6.1); `None` until every record is resolved.
    pub fn data_root(&self, height: u64) -> Option<BlockDataRoot> {
        if self.block_payloads(height) != BlockPayloads::Ready {
            return None;
        }
        let ranges = self.ranges(height)?;
        let mut halves = [empty_root(); 2];
        for (s, &(a, z)) in ranges.iter().enumerate().take(self.cfg.n_streams as usize) {
            let mut d = DataRootHasher::default();
            for rid in a..z {
                let r = self.subs[s].get(rid)?;
                if r.state == RecState::Excluded {
                    // 07 §9.4: 32 zero bytes for each unavailable packet.
                    d.push(&[0; 32]);
                } else if !r.advance {
                    d.push(&r.full?);
                }
            }
            halves[s] = d.finish();
        }
        Some(BlockDataRoot {
            data_root: data_root(&halves[0], &halves[1]),
            halves,
        })
    }
}
