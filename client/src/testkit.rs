//! Test doubles for the client and the load generator. **Not** a sequencer or a data box: small,
//! slow, allocation-happy models that answer the way 07 says the real boxes answer, so the
//! client's rules can be tested without them.
//!
//! - [`SeqDouble`]: a sequencer double. Per session it keeps `last(session)` and answers a
//!   request packet by the table of 07 §9.5 (`≤ last`: duplicate, the stored responses are
//!   resent with `flags.resend`; `= last + 1`: new, executed; `> last + 1`: `Reject{BAD_SEQ}`
//!   with `detail = last + 1`). It runs a tiny price-time book (GTC, IOC, Cancel; one step per
//!   message), numbers responses per session by `resp_seq`, tags them under `K_out`, keeps
//!   every response it sent in a hot ring keyed by the echoed `pkt_seq`, and emits the
//!   `Durable` and `Final` watermarks when told. [`SeqDouble::promote`] builds the next
//!   sequencer from its state, as replay would (07 §9.5).
//! - [`DataDouble`]: a data box double: checks `tag_seq`, dedupes copy 2 by
//!   `(session, pkt_seq)` and full hash (07 §5.2), and sends `SeqChange` / `DataRedirect`
//!   notices.
//! - [`Switch`]: a [`Port`] that routes each packet by its destination address to one of
//!   several ports (each typically a `Lossy<MemPort>`), so one client port reaches several
//!   doubles.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::SocketAddr;

use vyrn_nic::{Dest, NicError, Port, PortCounters, RxPacket, TxPacket, TxStamp};
use vyrn_wire::msg::addr_from_socket;
use vyrn_wire::msg::client::{
    full_hash, MsgType, Record, RejectCode, Request, Response, Side, SipKey, MSG_INDEX_NONE,
    RESP_MAX_RECORDS,
};
use vyrn_wire::msg::consensus::NEXT_SEQ_NONE;

// ---------------------------------------------------------------------------------------------
// Switch

/// A [`Port`] over several ports, one per peer address: `send_batch` routes each packet by its
/// [`Dest::Addr`]; `poll_recv` drains every port in turn. Received packets carry the source
/// address of the port they came from.
#[derive(Debug)]
pub struct Switch<P> {
    links: Vec<(SocketAddr, P)>,
    counters: PortCounters,
    max_payload: usize,
}

impl<P: Port> Switch<P> {
    /// A switch with no links.
    pub fn new() -> Self {
        Switch {
            links: Vec::new(),
            counters: PortCounters::default(),
            max_payload: usize::MAX,
        }
    }

    /// Add the link to `peer`.
    pub fn link(&mut self, peer: SocketAddr, port: P) {
        self.max_payload = self.max_payload.min(port.max_payload());
        self.links.push((peer, port));
    }

    /// The link to `peer`.
    pub fn get_mut(&mut self, peer: SocketAddr) -> Option<&mut P> {
        self.links
            .iter_mut()
            .find(|(a, _)| *a == peer)
            .map(|(_, p)| p)
    }
}

impl<P: Port> Default for Switch<P> {
    fn default() -> Self {
        Self::new()
    }
}

impl<P: Port> Port for Switch<P> {
    fn max_payload(&self) -> usize {
        self.max_payload
    }

    fn send_batch(&mut self, pkts: &[TxPacket<'_>]) -> Result<usize, NicError> {
        for (i, p) in pkts.iter().enumerate() {
            let Dest::Addr(a) = p.dest else {
                return if i == 0 {
                    Err(NicError::NoDestination)
                } else {
                    Ok(i)
                };
            };
            let Some(port) = self.get_mut(a) else {
                return if i == 0 {
                    Err(NicError::Unsupported("no link to this address"))
                } else {
                    Ok(i)
                };
            };
            match port.send_batch(std::slice::from_ref(p)) {
                Ok(1) => {
                    self.counters.tx_packets += 1;
                    self.counters.tx_bytes += p.data.len() as u64;
                }
                Ok(_) => return Ok(i),
                Err(e) => return if i == 0 { Err(e) } else { Ok(i) },
            }
        }
        Ok(pkts.len())
    }

    fn recv_batch(&mut self, batch: &mut vyrn_nic::RxBatch) -> Result<usize, NicError> {
        batch.clear();
        let mut n = 0;
        self.poll_recv(batch.capacity(), &mut |p| {
            if batch.push_copy(p.data, p.meta).is_ok() {
                n += 1;
            }
        })?;
        Ok(n)
    }

    fn poll_recv(
        &mut self,
        max: usize,
        f: &mut dyn FnMut(RxPacket<'_>),
    ) -> Result<usize, NicError> {
        let mut got = 0;
        for (addr, port) in self.links.iter_mut() {
            if got >= max {
                break;
            }
            let a = *addr;
            got += port.poll_recv(max - got, &mut |mut p| {
                p.meta.src = Some(a);
                f(p)
            })?;
        }
        self.counters.rx_packets += got as u64;
        Ok(got)
    }

    fn flush(&mut self) -> Result<(), NicError> {
        for (_, p) in self.links.iter_mut() {
            p.flush()?;
        }
        Ok(())
    }

    fn last_tx(&self) -> TxStamp {
        TxStamp::default()
    }

    fn counters(&self) -> PortCounters {
        self.counters
    }
}

// ---------------------------------------------------------------------------------------------
// Sequencer double

/// One session as the sequencer double knows it.
#[derive(Debug, Clone)]
struct SeqSession {
    k_seq: SipKey,
    k_out: SipKey,
    client: SocketAddr,
    /// `last(session)`: the highest pkt_seq processed (07 §9.5).
    last: u32,
    next_resp: u64,
    /// Hot ring: every response packet sent, by echoed pkt_seq: (resp_seq, records).
    hot: BTreeMap<u32, Vec<(u64, Vec<Record>)>>,
    /// resp_seqs of packets that carry no execution fact (watermarks, `BAD_SEQ` rejects):
    /// no resend recovers them, and losing them loses nothing but a hint.
    factless: Vec<u64>,
    contacted: bool,
}

#[derive(Debug, Clone, Copy)]
struct Resting {
    session: u32,
    tag: u32,
    side: Side,
    tick: i32,
    leaves: u32,
    placed: (u32, u8),
    step: u64,
}

/// One execution the double performed: the authoritative record of what happened, to check
/// the client's events against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Executed {
    /// Session.
    pub session: u32,
    /// The order (client_tag).
    pub tag: u32,
    /// The record sent about it.
    pub record: Record,
}

/// A sequencer test double. See the module docs.
#[derive(Debug, Clone)]
pub struct SeqDouble {
    /// Its client address.
    pub addr: SocketAddr,
    epoch: u32,
    tenure: u8,
    seq_index: u8,
    sessions: HashMap<u32, SeqSession>,
    book: Vec<Resting>,
    step: u64,
    steps_per_block: u64,
    durable_step: u64,
    view: u64,
    out: Vec<(SocketAddr, Vec<u8>)>,
    /// Every record sent about an order, in order: the authoritative execution log.
    pub log: Vec<Executed>,
    /// How many times each (session, pkt_seq) was executed (must never exceed 1).
    pub executions: HashMap<(u32, u32), u32>,
    /// Request packets with a bad tag, dropped.
    pub bad_tag: u64,
    /// Duplicates answered from the hot ring.
    pub duplicates: u64,
    /// `BAD_SEQ` rejects sent.
    pub bad_seq: u64,
}

impl SeqDouble {
    /// A sequencer double at `addr`, in `(epoch, tenure)`, sequencer index `seq_index`.
    /// Blocks hold `steps_per_block` steps: step `s` is in block `s / steps_per_block + 1`.
    pub fn new(addr: SocketAddr, epoch: u32, tenure: u8, seq_index: u8) -> Self {
        SeqDouble {
            addr,
            epoch,
            tenure,
            seq_index,
            sessions: HashMap::new(),
            book: Vec::new(),
            step: 0,
            steps_per_block: 8,
            durable_step: 0,
            view: 0,
            out: Vec::new(),
            log: Vec::new(),
            executions: HashMap::new(),
            bad_tag: 0,
            duplicates: 0,
            bad_seq: 0,
        }
    }

    /// Serve `session` with keys `k_seq`, `k_out`, answering to `client`.
    pub fn add_session(&mut self, session: u32, k_seq: SipKey, k_out: SipKey, client: SocketAddr) {
        self.sessions.insert(
            session,
            SeqSession {
                k_seq,
                k_out,
                client,
                last: 0,
                next_resp: 1,
                hot: BTreeMap::new(),
                factless: Vec::new(),
                contacted: false,
            },
        );
    }

    /// `last(session)` (07 §9.5).
    pub fn last(&self, session: u32) -> u32 {
        self.sessions.get(&session).map_or(0, |s| s.last)
    }

    /// The resp_seqs of `session`'s packets that carry no execution fact (watermarks and
    /// `BAD_SEQ` rejects): the only ones whose loss the client may report without losing a fact.
    pub fn factless(&self, session: u32) -> &[u64] {
        self.sessions
            .get(&session)
            .map_or(&[], |s| s.factless.as_slice())
    }

    /// The packet `session` got as `resp_seq`: (echoed pkt_seq, records), if stored.
    pub fn find_resp(&self, session: u32, resp_seq: u64) -> Option<(u32, Vec<Record>)> {
        let s = self.sessions.get(&session)?;
        s.hot.iter().find_map(|(echo, v)| {
            v.iter()
                .find(|(r, _)| *r == resp_seq)
                .map(|(_, recs)| (*echo, recs.clone()))
        })
    }

    /// The newest step.
    pub fn step(&self) -> u64 {
        self.step
    }

    /// The block holding step `s`.
    pub fn height_of(&self, s: u64) -> u64 {
        s / self.steps_per_block + 1
    }

    /// The next sequencer after a failover (07 §9.5): the replayed state of this one (book,
    /// `last(session)`, `resp_seq` counters, hot response ring), at `addr`, tenure + 1.
    pub fn promote(&self, addr: SocketAddr, seq_index: u8) -> SeqDouble {
        let mut next = self.clone();
        next.addr = addr;
        next.tenure = self.tenure.wrapping_add(1);
        next.seq_index = seq_index;
        next.out.clear();
        next.log.clear();
        for s in next.sessions.values_mut() {
            s.contacted = false;
        }
        next
    }

    /// The `SeqChange` record that announces this sequencer.
    pub fn seq_change(&self) -> Record {
        Record::SeqChange {
            epoch: self.epoch,
            tenure: self.tenure,
            new_seq: self.seq_index,
            addr: addr_from_socket(self.addr),
        }
    }

    /// Responses to send: (client address, packet bytes). Drains.
    pub fn take_out(&mut self) -> Vec<(SocketAddr, Vec<u8>)> {
        std::mem::take(&mut self.out)
    }

    fn send(&mut self, session: u32, echo: u32, records: Vec<Record>, store: bool) {
        let s = self.sessions.get_mut(&session).expect("known session");
        for chunk in records.chunks(RESP_MAX_RECORDS) {
            let resp_seq = s.next_resp;
            s.next_resp += 1;
            let r = Response {
                session,
                echo_pkt_seq: echo,
                resp_seq,
                resend: false,
                records: chunk.to_vec(),
            };
            self.out
                .push((s.client, r.to_bytes(&s.k_out).expect("valid response")));
            if store {
                s.hot
                    .entry(echo)
                    .or_default()
                    .push((resp_seq, chunk.to_vec()));
            } else {
                s.factless.push(resp_seq);
            }
        }
    }

    /// Handle one request packet (copy 1).
    pub fn handle(&mut self, bytes: &[u8]) {
        let Some(session) = vyrn_wire::msg::PktKey::peek_session(bytes) else {
            return;
        };
        let Some(s) = self.sessions.get_mut(&session) else {
            return;
        };
        let Ok(req) = Request::parse_verified(bytes, &s.k_seq) else {
            self.bad_tag += 1;
            return;
        };
        if !s.contacted {
            // "The new sequencer also sends it on first contact" (07 §9.5).
            s.contacted = true;
            let (client, k_out) = (s.client, s.k_out);
            let r = Response {
                session,
                echo_pkt_seq: 0,
                resp_seq: 1,
                resend: false,
                records: vec![self.seq_change()],
            };
            self.out.push((client, r.to_bytes(&k_out).expect("notice")));
        }
        let s = self.sessions.get_mut(&session).expect("known");
        let p = req.pkt_seq();
        // 07 §9.5, the resend dedupe table.
        if p <= s.last {
            self.duplicates += 1;
            let k_out = s.k_out;
            let client = s.client;
            for (resp_seq, records) in s.hot.get(&p).cloned().unwrap_or_default() {
                let r = Response {
                    session,
                    echo_pkt_seq: p,
                    resp_seq,
                    resend: true,
                    records,
                };
                self.out.push((client, r.to_bytes(&k_out).expect("resend")));
            }
            return;
        }
        if p > s.last + 1 {
            self.bad_seq += 1;
            let expect = s.last as u64 + 1;
            self.send(
                session,
                p,
                vec![Record::Reject {
                    msg_index: MSG_INDEX_NONE,
                    code: RejectCode::BadSeq,
                    detail: expect,
                    client_tag: 0,
                }],
                false,
            );
            return;
        }
        s.last = p;
        *self.executions.entry((session, p)).or_default() += 1;
        self.execute(session, req);
    }

    fn execute(&mut self, session: u32, req: Request<'_>) {
        let p = req.pkt_seq();
        let mut mine: Vec<Record> = Vec::new();
        // Maker records by (session, echo pkt_seq).
        let mut makers: BTreeMap<(u32, u32), Vec<Record>> = BTreeMap::new();
        for (i, m) in req.msgs().enumerate() {
            let i = i as u8;
            let Ok(m) = m else {
                continue;
            };
            self.step += 1;
            let step = self.step;
            match m.kind {
                MsgType::Cancel => {
                    let pos = self
                        .book
                        .iter()
                        .position(|r| r.session == session && r.tag == m.client_tag);
                    match pos {
                        Some(k) => {
                            self.book.remove(k);
                            mine.push(Record::CancelAck {
                                msg_index: i,
                                client_tag: m.client_tag,
                            });
                        }
                        None => mine.push(Record::Reject {
                            msg_index: i,
                            code: RejectCode::UnknownOrder,
                            detail: m.client_tag as u64,
                            client_tag: m.client_tag,
                        }),
                    }
                }
                MsgType::NewGtc | MsgType::NewIoc => {
                    let mut leaves = m.qty;
                    loop {
                        if leaves == 0 {
                            break;
                        }
                        // Best opposite order that crosses, price then time.
                        let best = self
                            .book
                            .iter()
                            .enumerate()
                            .filter(|(_, r)| {
                                r.side != m.side
                                    && match m.side {
                                        Side::Buy => r.tick <= m.tick,
                                        Side::Sell => r.tick >= m.tick,
                                    }
                            })
                            .min_by_key(|(_, r)| {
                                let price = if m.side == Side::Buy { r.tick } else { -r.tick };
                                (price, r.step)
                            })
                            .map(|(k, _)| k);
                        let Some(k) = best else { break };
                        let mk = &mut self.book[k];
                        let q = leaves.min(mk.leaves);
                        leaves -= q;
                        mk.leaves -= q;
                        let price = mk.tick;
                        mine.push(Record::Fill {
                            msg_index: i,
                            price,
                            qty: q,
                            leaves,
                            step,
                            client_tag: m.client_tag,
                        });
                        makers
                            .entry((mk.session, mk.placed.0))
                            .or_default()
                            .push(Record::Fill {
                                msg_index: mk.placed.1,
                                price,
                                qty: q,
                                leaves: mk.leaves,
                                step,
                                client_tag: mk.tag,
                            });
                        if mk.leaves == 0 {
                            self.book.remove(k);
                        }
                    }
                    if leaves > 0 {
                        if m.kind == MsgType::NewIoc {
                            mine.push(Record::Out {
                                msg_index: i,
                                qty: leaves,
                                client_tag: m.client_tag,
                            });
                        } else {
                            self.book.push(Resting {
                                session,
                                tag: m.client_tag,
                                side: m.side,
                                tick: m.tick,
                                leaves,
                                placed: (p, i),
                                step,
                            });
                            mine.push(Record::Ack {
                                msg_index: i,
                                client_tag: m.client_tag,
                            });
                        }
                    }
                }
            }
        }
        for r in &mine {
            self.log_record(session, r);
        }
        self.send(session, p, mine, true);
        for ((ms, echo), recs) in makers {
            for r in &recs {
                self.log_record(ms, r);
            }
            self.send(ms, echo, recs, true);
        }
    }

    fn log_record(&mut self, session: u32, r: &Record) {
        let tag = match *r {
            Record::Ack { client_tag, .. }
            | Record::Fill { client_tag, .. }
            | Record::CancelAck { client_tag, .. }
            | Record::Out { client_tag, .. }
            | Record::Reject { client_tag, .. } => client_tag,
            _ => return,
        };
        self.log.push(Executed {
            session,
            tag,
            record: *r,
        });
    }

    /// Send `Durable{step, height}` for the newest step to every session (07 §6.9).
    pub fn mark_durable(&mut self) {
        self.durable_step = self.step;
        let rec = Record::Durable {
            step: self.step,
            height: self.height_of(self.step),
        };
        let ids: Vec<u32> = self.sessions.keys().copied().collect();
        for id in ids {
            self.send(id, 0, vec![rec], false);
        }
    }

    /// Send `Final{height}` for the block of the newest durable step to every session.
    pub fn mark_final(&mut self) {
        self.view += 1;
        let rec = Record::Final {
            height: self.height_of(self.durable_step),
            view: self.view,
        };
        let ids: Vec<u32> = self.sessions.keys().copied().collect();
        for id in ids {
            self.send(id, 0, vec![rec], false);
        }
    }

    /// Receive every request waiting on `port`, answer, and send the answers back by it.
    pub fn serve<P: Port>(&mut self, port: &mut P) {
        let mut reqs = Vec::new();
        while port
            .poll_recv(64, &mut |p| reqs.push(p.data.to_vec()))
            .unwrap_or(0)
            > 0
        {}
        for r in reqs {
            self.handle(&r);
        }
        self.flush_to(port);
    }

    /// Send everything queued by `port`.
    pub fn flush_to<P: Port>(&mut self, port: &mut P) {
        for (to, bytes) in self.take_out() {
            // A full queue is loss; the client's resends recover it.
            let _ = port.send_batch(&[TxPacket::to(&bytes, Dest::Addr(to))]);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Data box double

/// A data box double (07 §5.2): stores copy 2, deduped by `(session, pkt_seq)` and full hash.
#[derive(Debug, Clone, Default)]
pub struct DataDouble {
    keys: HashMap<u32, (SipKey, SipKey)>,
    /// Stored packets: (session, pkt_seq) → full hash.
    pub stored: BTreeMap<(u32, u32), [u8; 32]>,
    /// Repeats with an equal hash (dropped; resends land here).
    pub repeats: u64,
    /// Packets that carried `flags.resend`.
    pub resends: u64,
    /// Repeats with a different hash (client equivocation, `CopyConflict`).
    pub conflicts: u64,
    /// Bad tags (`DataBadMac`).
    pub bad_mac: u64,
    /// Every (session, pkt_seq) received, in arrival order, resends included.
    pub arrivals: Vec<(u32, u32)>,
    seen: HashSet<(u32, u32)>,
}

impl DataDouble {
    /// Serve `session` (BASE: the box holds `K_seq`; `K_out` tags its notices).
    pub fn add_session(&mut self, session: u32, k_seq: SipKey, k_out: SipKey) {
        self.keys.insert(session, (k_seq, k_out));
    }

    /// Ingest one copy-2 packet.
    pub fn handle(&mut self, bytes: &[u8]) {
        let Some(session) = vyrn_wire::msg::PktKey::peek_session(bytes) else {
            return;
        };
        let Some(&(k_seq, _)) = self.keys.get(&session) else {
            return;
        };
        let Ok(req) = Request::parse_verified(bytes, &k_seq) else {
            self.bad_mac += 1;
            return;
        };
        let Ok(h) = full_hash(bytes) else { return };
        let key = (session, req.pkt_seq());
        self.arrivals.push(key);
        if req.resend() {
            self.resends += 1;
        }
        if !self.seen.insert(key) {
            if self.stored.get(&key) == Some(&h) {
                self.repeats += 1;
            } else {
                self.conflicts += 1;
            }
            return;
        }
        self.stored.insert(key, h);
    }

    /// A notice packet for `session` carrying `records` (`SeqChange`, `DataRedirect`).
    pub fn notice(&self, session: u32, records: Vec<Record>) -> Vec<u8> {
        let (_, k_out) = self.keys[&session];
        Response {
            session,
            echo_pkt_seq: 0,
            resp_seq: 1,
            resend: false,
            records,
        }
        .to_bytes(&k_out)
        .expect("notice")
    }

    /// `DataRedirect{from → to, resend_from}` for `session` (07 §5.7).
    pub fn redirect(&self, session: u32, from: u8, to: u8, resend_from: u32) -> Vec<u8> {
        self.notice(
            session,
            vec![Record::DataRedirect {
                from,
                to,
                resend_from,
            }],
        )
    }

    /// `SeqChange{new_seq: none}` for `session`.
    pub fn no_sequencer(&self, session: u32, epoch: u32, tenure: u8) -> Vec<u8> {
        self.notice(
            session,
            vec![Record::SeqChange {
                epoch,
                tenure,
                new_seq: NEXT_SEQ_NONE,
                addr: [0; 18],
            }],
        )
    }

    /// Receive every packet waiting on `port`.
    pub fn serve<P: Port>(&mut self, port: &mut P) {
        let mut pkts = Vec::new();
        while port
            .poll_recv(64, &mut |p| pkts.push(p.data.to_vec()))
            .unwrap_or(0)
            > 0
        {}
        for p in pkts {
            self.handle(&p);
        }
    }
}
