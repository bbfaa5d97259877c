//! [`DataBox`]: the tiles of 07 §5.2 and §5.7 wired in order, run to completion per packet on
//! one thread, with the out queue they all write into. Pure: no I/O, no clock; the driver
//! ([`crate::driver`]) feeds it packets and time and drains what it queued.

use std::net::SocketAddr;

use vyrn_wire::error::Malformed;
use vyrn_wire::header::Hash;
use vyrn_wire::msg::client::{pkt_hash_of, REQ_MAX_LEN};
use vyrn_wire::msg::ctrl::{
    ty, CopyConflict, DataBadMac, DataDown, DataFetch, DataRedirect, SeqChange,
};
use vyrn_wire::msg::data::DATA_HDR_BYTES;

use crate::config::{ConfigError, DataConfig, FETCH_RANGE_MAX};
use crate::counters::Counters;
use crate::dedupe::{Dedupe, Verdict};
use crate::failover::Failover;
use crate::fanout::{put_header, put_pkt, FanOut};
use crate::ingest::{full_hash, same_content, IngestError, Mac, Parse, Parsed};
use crate::out::{Class, OutQueue, To};
use crate::store::Store;

/// What [`DataBox::on_packet`] did with a packet it kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accepted {
    /// A new `(session, pkt_seq)`: stored under ring seq `seq` and fanned out.
    Stored {
        /// Ring sequence number.
        seq: u64,
    },
    /// A second copy with a different full hash: stored under `seq`, not forwarded,
    /// `CopyConflict` queued to the sequencer with both packets.
    Conflict {
        /// Ring sequence number of this (second) copy.
        seq: u64,
    },
}

/// Why a control message was not acted on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CtrlError {
    /// It did not parse.
    Malformed(Malformed),
    /// A type a data box does not take (its type byte).
    Unexpected(u8),
}

/// One data box: every tile and the out queue.
#[derive(Debug)]
pub struct DataBox {
    parse: Parse,
    mac: Mac,
    dedupe: Dedupe,
    store: Store,
    fanout: FanOut,
    failover: Failover,
    out: OutQueue,
    counters: Counters,
    n_dests: usize,
    /// Per session index: (second, `DataBadMac` reports in it) — each claimed session's share
    /// of the reports ([`BAD_MAC_REPORTS_PER_S`]).
    bad_mac_share: Vec<(u64, u32)>,
}

/// `DataBadMac` reports per second at most for one claimed session: a flood of bad tags under
/// one session id (anyone can claim one) makes at most this many 9-byte reports toward the
/// sequencer a second; the rest are counted (`bad_mac_over_share`) and dropped with their
/// packet as before. A client whose key is wrong shows in the first 64 a second.
pub const BAD_MAC_REPORTS_PER_S: u32 = 64;

impl DataBox {
    /// Validate `cfg` and build every table (all memory the box will use is allocated here).
    pub fn new(cfg: &DataConfig) -> Result<Self, ConfigError> {
        cfg.validate()?;
        let ids: Vec<u32> = cfg.sessions.iter().map(|s| s.session).collect();
        let cap = cfg.ring.capacity() as usize;
        let voters = cfg
            .dests
            .iter()
            .enumerate()
            .filter(|(_, d)| d.voter)
            .fold(0u64, |m, (i, _)| m | 1 << i);
        let fo: Vec<_> = cfg
            .sessions
            .iter()
            .map(|s| (s.session, s.home, s.k_out, s.addr))
            .collect();
        Ok(DataBox {
            parse: Parse::new(&cfg.books, &ids, cfg.index_seed),
            mac: Mac::new(cfg.sessions.iter().map(|s| s.k_seq).collect()),
            dedupe: Dedupe::new(ids.len()),
            store: Store::new(cap, cfg.index_seed),
            fanout: FanOut::new(
                &cfg.books,
                cap,
                cfg.index,
                cfg.epoch as u16,
                cfg.batch_ns,
                cfg.hb_ns,
            ),
            failover: Failover::new(cfg.index, &cfg.boxes, cfg.quorum, voters, &fo),
            out: OutQueue::new(cfg.out_slots),
            counters: Counters::default(),
            n_dests: cfg.dests.len(),
            bad_mac_share: vec![(u64::MAX, 0); ids.len()],
        })
    }

    /// The counters.
    pub fn counters(&self) -> &Counters {
        &self.counters
    }

    /// The counters, for the driver's own ones.
    pub fn counters_mut(&mut self) -> &mut Counters {
        &mut self.counters
    }

    /// The store (ring and indexes), read-only.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The address `session`'s redirects go to, as learned from its fresh packets.
    pub fn session_addr(&self, session: u32) -> Option<SocketAddr> {
        self.failover.addr(self.parse.session_index(session)?)
    }

    /// The failover tile, read-only.
    pub fn failover(&self) -> &Failover {
        &self.failover
    }

    /// The fan-out tile, read-only.
    pub fn fanout(&self) -> &FanOut {
        &self.fanout
    }

    /// The dedupe tile, read-only.
    pub fn dedupe(&self) -> &Dedupe {
        &self.dedupe
    }

    /// The out queue: what waits to be sent.
    pub fn out(&mut self) -> &mut OutQueue {
        &mut self.out
    }

    /// Destinations.
    pub fn n_dests(&self) -> usize {
        self.n_dests
    }

    /// One client packet through parse → MAC → dedupe → hash → store → fan-out (07 §5.2).
    /// Every outcome is counted once. No allocation, lock or syscall.
    #[inline]
    pub fn on_packet(
        &mut self,
        pkt: &[u8],
        src: Option<SocketAddr>,
        now_ns: u64,
    ) -> Result<Accepted, IngestError> {
        self.counters.rx_packets += 1;
        self.counters.rx_bytes += pkt.len() as u64;
        let r = self.ingest(pkt, src, now_ns);
        match r {
            Ok(Accepted::Stored { .. }) => self.counters.stored += 1,
            Ok(Accepted::Conflict { .. }) => self.counters.conflicts += 1,
            Err(e) => self.count_drop(e),
        }
        r
    }

    fn count_drop(&mut self, e: IngestError) {
        let c = &mut self.counters;
        let n = match e {
            IngestError::BadLen => &mut c.drop_bad_len,
            IngestError::BadCount => &mut c.drop_bad_count,
            IngestError::BadFlags => &mut c.drop_bad_flags,
            IngestError::BadReserved => &mut c.drop_bad_reserved,
            IngestError::BadSeq => &mut c.drop_bad_seq,
            IngestError::BadBook => &mut c.drop_bad_book,
            IngestError::UnknownSession => &mut c.drop_unknown_session,
            IngestError::BadMac => &mut c.drop_bad_mac,
            IngestError::Duplicate => &mut c.drop_duplicate,
            IngestError::Late => &mut c.drop_late,
            IngestError::RepeatEvicted => &mut c.drop_repeat_evicted,
        };
        *n += 1;
    }

    #[inline]
    fn ingest(
        &mut self,
        pkt: &[u8],
        src: Option<SocketAddr>,
        now_ns: u64,
    ) -> Result<Accepted, IngestError> {
        let p = self.parse.parse(pkt)?;
        if let Err(e) = self.mac.check(&p) {
            self.report_bad_mac(&p, now_ns);
            return Err(e);
        }
        // 07 §5.7: the address redirects go to is learned only from a fresh packet whose tag
        // verified, never from a replayed copy of an old one (security review F6; the
        // sequencer's rule, 07 §9.5).
        self.failover.seen(p.sidx, None);
        let (session, pkt_seq) = (p.req.session(), p.req.pkt_seq());
        match self.dedupe.check(p.sidx, pkt_seq) {
            Verdict::Late => Err(IngestError::Late),
            Verdict::New => {
                self.failover.seen(p.sidx, src);
                let h = full_hash(pkt);
                let (seq, st) = self.store.put(pkt, session, pkt_seq, pkt_hash_of(&h), true);
                self.count_put(st);
                self.dedupe.mark(p.sidx, pkt_seq);
                self.fanout.append(
                    p.req.book(),
                    seq,
                    pkt,
                    now_ns,
                    &mut self.store.ring,
                    &mut self.out,
                    &mut self.counters,
                );
                Ok(Accepted::Stored { seq })
            }
            Verdict::Repeat => self.repeat(&p, pkt),
        }
    }

    /// A `pkt_seq` already stored: equal content is a duplicate; different content is client
    /// equivocation (07 §5.2): store it too, keep forwarding the first, report both.
    #[cold]
    fn repeat(&mut self, p: &Parsed<'_>, pkt: &[u8]) -> Result<Accepted, IngestError> {
        let (session, pkt_seq) = (p.req.session(), p.req.pkt_seq());
        let mut first = [0u8; REQ_MAX_LEN];
        let first_len = match self.store.by_key(session, pkt_seq) {
            None => return Err(IngestError::RepeatEvicted),
            Some(s) if same_content(s.packet(), pkt) => return Err(IngestError::Duplicate),
            Some(s) => {
                first[..s.len as usize].copy_from_slice(s.packet());
                s.len as usize
            }
        };
        let h2 = full_hash(pkt);
        let ph2 = pkt_hash_of(&h2);
        // A copy of an already stored second (or third…) copy is a duplicate too.
        if self
            .store
            .by_hash(ph2, session, pkt_seq, |s| same_content(s.packet(), pkt))
            .is_some()
        {
            return Err(IngestError::Duplicate);
        }
        let (seq, st) = self.store.put(pkt, session, pkt_seq, ph2, false);
        self.count_put(st);
        let h1 = full_hash(&first[..first_len]);
        self.report_conflict(
            p.req.book(),
            session,
            pkt_seq,
            h1,
            h2,
            &first[..first_len],
            pkt,
        );
        Ok(Accepted::Conflict { seq })
    }

    fn count_put(&mut self, st: crate::store::PutStats) {
        self.counters.ring_evicted += st.evicted as u64;
        self.counters.index_displaced_live += st.displaced as u64;
    }

    /// `DataBadMac{session, pkt_seq}` to the sequencer's control core (07 §5.2).
    #[cold]
    fn report_bad_mac(&mut self, p: &Parsed<'_>, now_ns: u64) {
        if let Some(b) = self.bad_mac_share.get_mut(p.sidx as usize) {
            let sec = now_ns / 1_000_000_000;
            if b.0 != sec {
                *b = (sec, 0);
            }
            if b.1 >= BAD_MAC_REPORTS_PER_S {
                self.counters.bad_mac_over_share += 1;
                return;
            }
            b.1 += 1;
        }
        let Some(id) = self.out.alloc(Class::Ctrl) else {
            self.counters.ctrl_out_full += 1;
            return;
        };
        let m = DataBadMac {
            session: p.req.session(),
            pkt_seq: p.req.pkt_seq(),
        };
        // DataBadMac has no semantic check: encode cannot fail.
        let _ = m.encode(self.out.buf_mut(id));
        self.out.commit(id, To::SeqCtrl);
        self.counters.bad_mac_reports += 1;
    }

    /// `CopyConflict{session, pkt_seq, h1, h2}` and a `FETCH_RESP` frame (data_seq 0) with both
    /// packets, first copy first, to the sequencer (07 §5.2, docs/wire-messages.md §1).
    #[cold]
    #[allow(clippy::too_many_arguments)]
    fn report_conflict(
        &mut self,
        book: u16,
        session: u32,
        pkt_seq: u32,
        h1: Hash,
        h2: Hash,
        first: &[u8],
        second: &[u8],
    ) {
        let ids = (self.out.alloc(Class::Ctrl), self.out.alloc(Class::Ctrl));
        let (Some(a), Some(b)) = ids else {
            if let Some(a) = ids.0 {
                self.out.cancel(a);
            }
            if let Some(b) = ids.1 {
                self.out.cancel(b);
            }
            self.counters.ctrl_out_full += 1;
            return;
        };
        let m = CopyConflict {
            session,
            pkt_seq,
            h1,
            h2,
        };
        // h1 ≠ h2 here (same_content was false), so encode cannot fail.
        let _ = m.encode(self.out.buf_mut(a));
        self.out.commit(a, To::SeqCtrl);
        let buf = self.out.buf_mut(b);
        buf.resize(DATA_HDR_BYTES, 0);
        put_pkt(buf, first);
        put_pkt(buf, second);
        let body = buf.len() - DATA_HDR_BYTES;
        let h = self.fanout.evidence_header(book, 2, body);
        put_header(self.out.buf_mut(b), h);
        self.out.commit(b, To::SeqCtrl);
        self.counters.conflict_reports += 1;
        self.counters.frames_fetch_resp += 1;
    }

    /// One control message from destination `from` (07 §5.3 `DataFetch`, §5.5, §5.7).
    pub fn on_ctrl(&mut self, from: usize, msg: &[u8], _now_ns: u64) -> Result<(), CtrlError> {
        self.counters.ctrl_rx += 1;
        let r = self.ctrl(from, msg);
        match r {
            Err(CtrlError::Malformed(_)) => self.counters.ctrl_malformed += 1,
            Err(CtrlError::Unexpected(_)) => self.counters.ctrl_unexpected += 1,
            Ok(()) => {}
        }
        r
    }

    fn ctrl(&mut self, from: usize, msg: &[u8]) -> Result<(), CtrlError> {
        let t = *msg
            .first()
            .ok_or(CtrlError::Malformed(Malformed::Truncated))?;
        match t {
            ty::DATA_FETCH_RANGE | ty::DATA_FETCH_KEY => {
                let f = DataFetch::parse(msg).map_err(CtrlError::Malformed)?;
                self.on_fetch(from, f);
            }
            ty::DATA_DOWN => {
                let d = DataDown::parse(msg).map_err(CtrlError::Malformed)?;
                self.failover.on_data_down(from, d.d, &mut self.counters);
            }
            ty::DATA_REDIRECT => {
                let r = DataRedirect::parse(msg).map_err(CtrlError::Malformed)?;
                let sidx = self.parse.session_index(r.session);
                self.failover
                    .on_redirect(&r, sidx, &mut self.out, &mut self.counters);
            }
            ty::SEQ_CHANGE => {
                let m = SeqChange::parse(msg).map_err(CtrlError::Malformed)?;
                self.failover
                    .on_seq_change(from, &m, &mut self.out, &mut self.counters);
            }
            t => return Err(CtrlError::Unexpected(t)),
        }
        Ok(())
    }

    /// Serve a `DataFetch` from the ring (07 §5.3, §5.5). A range is answered frame by frame,
    /// each `FETCH_RESP` under the original `data_seq` with the frame's packets still in the
    /// ring, or empty when none is (at most `FETCH_RANGE_MAX` frames per request). A key is
    /// answered with one `FETCH_RESP` (`data_seq` 0) holding the first copy; a key the ring no
    /// longer holds gets no answer, since an empty frame could not say which key it refers to.
    fn on_fetch(&mut self, from: usize, f: DataFetch) {
        let to = To::Dest(from as u16);
        match f {
            DataFetch::Range { from: lo, to: hi } => {
                self.counters.fetch_range_reqs += 1;
                let last = self.fanout.last_data_seq();
                let lo = lo.max(1);
                let end = hi.min(last).min(lo.saturating_add(FETCH_RANGE_MAX - 1));
                let served = if end >= lo { end - lo + 1 } else { 0 };
                if end < hi {
                    self.counters.fetch_range_clamped += 1;
                }
                for k in lo..lo + served {
                    let Some(id) = self.out.alloc(Class::Ctrl) else {
                        self.counters.fetch_out_full += 1;
                        return;
                    };
                    let n = self
                        .fanout
                        .rebuild(k, &self.store.ring, self.out.buf_mut(id));
                    self.out.commit(id, to);
                    self.counters.frames_fetch_resp += 1;
                    if n == 0 {
                        self.counters.fetch_range_gone += 1;
                    } else {
                        self.counters.fetch_range_frames += 1;
                    }
                }
            }
            DataFetch::Key(k) => {
                self.counters.fetch_key_reqs += 1;
                let Some(s) = self.store.by_key(k.session, k.pkt_seq) else {
                    self.counters.fetch_key_misses += 1;
                    return;
                };
                let Some(id) = self.out.alloc(Class::Ctrl) else {
                    self.counters.fetch_out_full += 1;
                    return;
                };
                let book = u16::from_le_bytes([s.bytes[0], s.bytes[1]]);
                let buf = self.out.buf_mut(id);
                buf.resize(DATA_HDR_BYTES, 0);
                put_pkt(buf, s.packet());
                let body = buf.len() - DATA_HDR_BYTES;
                let h = self.fanout.evidence_header(book, 1, body);
                put_header(self.out.buf_mut(id), h);
                self.out.commit(id, to);
                self.counters.fetch_key_hits += 1;
                self.counters.frames_fetch_resp += 1;
            }
        }
    }

    /// Timers (07 §5.2 frame age, §5.3 heartbeat). Returns the frames sent.
    pub fn poll(&mut self, now_ns: u64) -> usize {
        self.fanout.poll(now_ns, &mut self.out, &mut self.counters)
    }

    /// Send every open frame now.
    pub fn flush(&mut self, now_ns: u64) {
        self.fanout
            .flush_all(now_ns, &mut self.out, &mut self.counters)
    }
}
