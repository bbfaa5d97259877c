//! The recovery service's response store (07 §8.5): every response packet replay produces,
//! kept per session as REP_RspEntry ([`vyrn_wire::msg::rsp_entry`]) in a chain of 4 KiB pages
//! covering the session's last [`RESP_RETAIN_PKTS`], so a resend older than the box's hot ring
//! is rebuilt exactly — `flags.resend` set, tagged by the sender under `K_out` — instead of
//! answered `RESEND_GONE`.
//!
//! A page holds whole entries and its first `resp_seq`; the delta state starts from zero at
//! every [`RSP_GROUP`]th entry of a page, whose offset the page's index keeps in RAM, so a
//! lookup decodes at most [`RSP_GROUP`] entries (a whole 4 KiB page holds ~380 at the peak
//! mix: walking it was 63× the sender's SipHash, `--bench recovery`). A
//! session's oldest page goes back to the free list once the others hold
//! [`RESP_RETAIN_PKTS`]. A `resp_seq` that skips ahead (the replay started from a snapshot)
//! opens a new page; one at or below what is kept is a repeat and is not kept twice.
//!
//! Pages are in memory here; 07 puts them on R3's NVMe (REP_RSP_STORE_BYTES, a slow session's
//! open page flushed every 10 s) — not built. Hot path (the replay sink, once per response):
//! one hash-map lookup, the entry's encoding into a fixed buffer and a copy; a 4 KiB page is
//! allocated only while the store grows to its retention, then pages are reused.

use std::collections::{HashMap, VecDeque};

use vyrn_wire::consts::RESP_RETAIN_PKTS;
use vyrn_wire::leb::Reader;
use vyrn_wire::msg::client::NOTICE_RESP_SEQ;
use vyrn_wire::msg::rsp_entry::{self, EntryState, RSP_ENTRY_MAX, RSP_PACKET_MAX};
use vyrn_wire::Malformed;

/// Bytes of one page (07 §8.5).
pub const RSP_PAGE_BYTES: usize = 4096;

/// Entries of a page decoded from one restart of the delta state (a lookup decodes at most
/// this many).
pub const RSP_GROUP: u32 = 16;

/// Groups a page can hold: its shortest entry is 4 bytes (echo, count, a one-byte record
/// head and a one-byte field).
const GROUPS_MAX: usize = RSP_PAGE_BYTES / 4 / RSP_GROUP as usize + 1;

type PageBuf = Box<[u8; RSP_PAGE_BYTES]>;

struct Page {
    /// The `resp_seq` of its first entry.
    first: u64,
    /// Entries in it.
    n: u32,
    /// Bytes used.
    used: u32,
    /// Where each group of [`RSP_GROUP`] entries starts (the state is zero there).
    groups: [u16; GROUPS_MAX],
    /// The least and greatest `echo_pkt_seq` of each group's entries (a resend asks by the
    /// request's `pkt_seq`: only groups whose range holds it are decoded).
    echo: [(u32, u32); GROUPS_MAX],
    bytes: PageBuf,
}

#[derive(Default)]
struct SessionLog {
    /// Oldest first; the last is open.
    pages: VecDeque<Page>,
    /// The state after the open page's last entry.
    st: EntryState,
    /// The next `resp_seq` expected (0: nothing kept yet).
    next: u64,
    /// Entries held.
    held: u64,
}

/// Why a response was not kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeepError {
    /// Not a session of the home.
    UnknownSession,
    /// At or below a `resp_seq` already kept.
    Repeat,
    /// Not a response packet whose records can be kept exactly.
    Malformed(Malformed),
}

/// What the store did (`vyrn_replica_rsp_*`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RspCounters {
    /// Response packets kept.
    pub kept: u64,
    /// Their entries' bytes.
    pub entry_bytes: u64,
    /// Their wire bytes (what the entries stand for).
    pub packet_bytes: u64,
    /// Notices (outside the session's numbering: never resent), not kept.
    pub notices: u64,
    /// Refused: an unknown session, a repeat, a packet that does not encode.
    pub refused: u64,
    /// `resp_seq` gaps that opened a new page (a replay started from a snapshot).
    pub gaps: u64,
    /// Entries dropped past the retention.
    pub evicted: u64,
    /// Pages in use.
    pub pages: u64,
    /// Resends rebuilt.
    pub rebuilt: u64,
    /// Asked for a packet not held.
    pub gone: u64,
}

impl RspCounters {
    /// Mean entry bytes per packet kept (B-REP-14: ≤ 53 B at the peak mix).
    pub fn bytes_per_packet(&self) -> f64 {
        self.entry_bytes as f64 / self.kept.max(1) as f64
    }
}

/// The store of one recovery service.
pub struct RspStore {
    sessions: HashMap<u32, SessionLog>,
    free: Vec<PageBuf>,
    retain: u64,
    scratch: Box<[u8; RSP_ENTRY_MAX]>,
    c: RspCounters,
}

impl std::fmt::Debug for RspStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RspStore")
            .field("sessions", &self.sessions.len())
            .field("retain", &self.retain)
            .field("counters", &self.c)
            .finish()
    }
}

impl RspStore {
    /// A store for `sessions`, each keeping its last `retain` packets
    /// ([`RESP_RETAIN_PKTS`] in production).
    pub fn new(sessions: impl IntoIterator<Item = u32>, retain: u64) -> Self {
        RspStore {
            sessions: sessions
                .into_iter()
                .map(|s| (s, SessionLog::default()))
                .collect(),
            free: Vec::new(),
            retain: retain.max(1),
            scratch: Box::new([0; RSP_ENTRY_MAX]),
            c: RspCounters::default(),
        }
    }

    /// The store 07 §8.5 sizes: [`RESP_RETAIN_PKTS`] per session.
    pub fn spec(sessions: impl IntoIterator<Item = u32>) -> Self {
        Self::new(sessions, RESP_RETAIN_PKTS)
    }

    /// Keep response packet `pkt` (session `session`, number `resp_seq`; its tag is not kept).
    pub fn keep(&mut self, session: u32, resp_seq: u64, pkt: &[u8]) -> Result<(), KeepError> {
        if resp_seq == NOTICE_RESP_SEQ {
            self.c.notices += 1;
            return Ok(());
        }
        let r = self.keep_inner(session, resp_seq, pkt);
        if r.is_err() {
            self.c.refused += 1;
        }
        r
    }

    fn keep_inner(&mut self, session: u32, resp_seq: u64, pkt: &[u8]) -> Result<(), KeepError> {
        let log = self
            .sessions
            .get_mut(&session)
            .ok_or(KeepError::UnknownSession)?;
        if resp_seq == 0 || (log.next != 0 && resp_seq < log.next) {
            return Err(KeepError::Repeat);
        }
        let gap = log.next != 0 && resp_seq > log.next;
        // Encoded against the open page's state, or from zero where a page or a group starts.
        let fresh = gap || log.pages.back().is_none_or(|p| p.n % RSP_GROUP == 0);
        let mut st = if fresh { EntryState::default() } else { log.st };
        let mut n =
            rsp_entry::encode(&mut st, pkt, &mut self.scratch[..]).map_err(KeepError::Malformed)?;
        let fits = log
            .pages
            .back()
            .is_some_and(|p| p.used as usize + n <= RSP_PAGE_BYTES);
        if gap || !fits {
            if gap {
                self.c.gaps += 1;
            }
            if !fresh {
                // A full page: the entry starts the next one, from a zero state.
                st = EntryState::default();
                n = rsp_entry::encode(&mut st, pkt, &mut self.scratch[..])
                    .map_err(KeepError::Malformed)?;
            }
            let bytes = self
                .free
                .pop()
                .unwrap_or_else(|| Box::new([0; RSP_PAGE_BYTES]));
            log.pages.push_back(Page {
                first: resp_seq,
                n: 0,
                used: 0,
                groups: [0; GROUPS_MAX],
                echo: [(u32::MAX, 0); GROUPS_MAX],
                bytes,
            });
            self.c.pages += 1;
        }
        let Some(p) = log.pages.back_mut() else {
            unreachable!("a page was just opened or found")
        };
        let g = (p.n / RSP_GROUP) as usize;
        if p.n % RSP_GROUP == 0 {
            p.groups[g] = p.used as u16;
            p.echo[g] = (u32::MAX, 0);
        }
        let echo = st.echo;
        p.echo[g] = (p.echo[g].0.min(echo), p.echo[g].1.max(echo));
        p.bytes[p.used as usize..p.used as usize + n].copy_from_slice(&self.scratch[..n]);
        p.used += n as u32;
        p.n += 1;
        log.st = st;
        log.next = resp_seq + 1;
        log.held += 1;
        self.c.kept += 1;
        self.c.entry_bytes += n as u64;
        self.c.packet_bytes += pkt.len() as u64;
        // 07 §8.5: the last `retain` packets; the oldest page goes once the rest hold them.
        while log.pages.len() > 1 && log.held - log.pages[0].n as u64 >= self.retain {
            if let Some(old) = log.pages.pop_front() {
                log.held -= old.n as u64;
                self.c.evicted += old.n as u64;
                self.c.pages -= 1;
                self.free.push(old.bytes);
            }
        }
        Ok(())
    }

    /// The packet `resp_seq` of `session`, rebuilt into `out` with `flags.resend` and a zero
    /// tag (07 §8.5: the sender tags it under `K_out`). None when not held.
    pub fn rebuild(
        &mut self,
        session: u32,
        resp_seq: u64,
        out: &mut [u8; RSP_PACKET_MAX],
    ) -> Option<usize> {
        let r = self.find(session, resp_seq, out);
        match r {
            Some(_) => self.c.rebuilt += 1,
            None => self.c.gone += 1,
        }
        r
    }

    fn find(&self, session: u32, resp_seq: u64, out: &mut [u8; RSP_PACKET_MAX]) -> Option<usize> {
        let log = self.sessions.get(&session)?;
        let i = log.pages.partition_point(|p| p.first <= resp_seq);
        let p = log.pages.get(i.checked_sub(1)?)?;
        if resp_seq >= p.first + p.n as u64 {
            return None;
        }
        let g = ((resp_seq - p.first) / RSP_GROUP as u64) as usize;
        let from = *p.groups.get(g)? as usize;
        let mut st = EntryState::default();
        let mut r = Reader::new(p.bytes.get(from..p.used as usize)?);
        for seq in p.first + (g as u64) * RSP_GROUP as u64..=resp_seq {
            let n = rsp_entry::decode(&mut st, &mut r, session, seq, out).ok()?;
            if seq == resp_seq {
                return Some(n);
            }
        }
        None
    }

    /// Every packet held for `session` that answers its request `pkt_seq` (its
    /// `echo_pkt_seq`), oldest first, each rebuilt into `out` with `flags.resend` and a zero tag
    /// and handed to `emit` (07 §8.5: a client's resend of a packet the box's hot ring no longer
    /// holds). Returns how many. Decodes only the groups whose `echo_pkt_seq` range holds
    /// `pkt_seq` (a maker's fill answers a request long after it: its group's range is wide).
    pub fn rebuild_answers(
        &mut self,
        session: u32,
        pkt_seq: u32,
        out: &mut [u8; RSP_PACKET_MAX],
        mut emit: impl FnMut(&[u8]),
    ) -> usize {
        let mut n = 0;
        if let Some(log) = self.sessions.get(&session) {
            for p in &log.pages {
                let groups = p.n.div_ceil(RSP_GROUP) as usize;
                for g in 0..groups {
                    let (lo, hi) = p.echo[g];
                    if pkt_seq < lo || pkt_seq > hi {
                        continue;
                    }
                    let first = p.first + g as u64 * RSP_GROUP as u64;
                    let end = (p.first + p.n as u64).min(first + RSP_GROUP as u64);
                    let Some(bytes) = p.bytes.get(p.groups[g] as usize..p.used as usize) else {
                        continue;
                    };
                    let mut st = EntryState::default();
                    let mut r = Reader::new(bytes);
                    for seq in first..end {
                        let Ok(k) = rsp_entry::decode(&mut st, &mut r, session, seq, out) else {
                            break;
                        };
                        if st.echo == pkt_seq {
                            emit(&out[..k]);
                            n += 1;
                        }
                    }
                }
            }
        }
        self.c.rebuilt += n as u64;
        if n == 0 {
            self.c.gone += 1;
        }
        n
    }

    /// The oldest and newest `resp_seq` held for `session` (gaps inside are not held).
    pub fn range(&self, session: u32) -> Option<(u64, u64)> {
        let log = self.sessions.get(&session)?;
        Some((log.pages.front()?.first, log.next.checked_sub(1)?))
    }

    /// What the store did.
    pub fn counters(&self) -> RspCounters {
        self.c
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vyrn_engine::workload::{live_capture, Mix};
    use vyrn_engine::{Capture, EngineConfig};
    use vyrn_wire::msg::client::RESP_FLAG_RESEND;

    /// A live run of the engine at `mix`: every session's responses in send order.
    fn responses(mix: Mix, n: usize) -> (EngineConfig, Capture) {
        let c = EngineConfig::unlimited_home(2, 4);
        let cap = live_capture(&c, 9, mix, n);
        (c, cap)
    }

    fn resp_seq(pkt: &[u8]) -> u64 {
        u64::from_le_bytes(pkt[8..16].try_into().unwrap())
    }

    /// The packet as a resend: `flags.resend`, the tag left to the sender.
    fn as_rebuilt(pkt: &[u8]) -> Vec<u8> {
        let mut w = pkt.to_vec();
        w[17] |= RESP_FLAG_RESEND;
        let k = w.len();
        w[k - 16..].fill(0);
        w
    }

    /// Every response of a live run at the peak mix is kept; the last `retain` of each session
    /// rebuild byte for byte (as resends), older ones are gone; the entries stay inside 07
    /// §8.5's ~53 B a packet (B-REP-14; the figure itself is `--bench recovery`'s).
    #[test]
    fn the_last_packets_of_every_session_rebuild_exactly() {
        let (c, cap) = responses(Mix::peak(), 20_000);
        let retain = 300;
        let mut s = RspStore::new(c.sessions.iter().map(|x| x.session), retain);
        let mut total = 0;
        for (&session, rs) in &cap.responses {
            for (pkt, _) in rs {
                let q = resp_seq(pkt);
                if q != NOTICE_RESP_SEQ {
                    total += 1;
                }
                s.keep(session, q, pkt).expect("kept");
            }
        }
        let k = s.counters();
        assert_eq!(k.kept, total);
        assert!(k.kept > 2_000 && k.evicted > 0, "{k:?}");
        let mut out = [0u8; RSP_PACKET_MAX];
        let mut checked = 0;
        for (&session, rs) in &cap.responses {
            let numbered: Vec<&Vec<u8>> = rs
                .iter()
                .map(|x| &x.0)
                .filter(|p| resp_seq(p) != NOTICE_RESP_SEQ)
                .collect();
            let (lo, hi) = s.range(session).expect("held");
            assert_eq!(hi, numbered.len() as u64);
            assert!(hi - lo + 1 >= retain, "{lo}..={hi}");
            for p in &numbered {
                let q = resp_seq(p);
                match s.rebuild(session, q, &mut out) {
                    Some(n) => {
                        assert!(q >= lo);
                        assert_eq!(out[..n], as_rebuilt(p)[..], "session {session} resp {q}");
                        checked += 1;
                    }
                    None => assert!(q < lo, "{q} held in {lo}..={hi} but not rebuilt"),
                }
            }
        }
        assert!(checked as u64 >= retain * cap.responses.len() as u64);
        // By the request they answer (a client's resend names its pkt_seq): every held packet
        // echoing it, oldest first — a maker's fill too, however far from its request.
        let mut asked = 0;
        for (&session, rs) in &cap.responses {
            let (lo, _) = s.range(session).expect("held");
            let held: Vec<&Vec<u8>> = rs
                .iter()
                .map(|x| &x.0)
                .filter(|p| resp_seq(p) != NOTICE_RESP_SEQ && resp_seq(p) >= lo)
                .collect();
            let mut echoes: Vec<u32> = held
                .iter()
                .map(|p| u32::from_le_bytes(p[4..8].try_into().unwrap()))
                .collect();
            echoes.sort_unstable();
            echoes.dedup();
            for e in echoes {
                let want: Vec<Vec<u8>> = held
                    .iter()
                    .filter(|p| p[4..8] == e.to_le_bytes())
                    .map(|p| as_rebuilt(p))
                    .collect();
                let mut got = Vec::new();
                let n = s.rebuild_answers(session, e, &mut out, |b| got.push(b.to_vec()));
                assert_eq!((n, &got), (want.len(), &want), "session {session} pkt {e}");
                asked += 1;
            }
        }
        assert!(asked > 200, "{asked}");
        let mut none = 0;
        assert_eq!(s.rebuild_answers(1, u32::MAX, &mut out, |_| none += 1), 0);
        assert_eq!(none, 0);
        assert!(
            k.bytes_per_packet() <= 53.0,
            "{:.1} B a packet",
            k.bytes_per_packet()
        );
    }

    /// Repeats and unknown sessions are refused (counted), notices are not kept, and a
    /// `resp_seq` that skips ahead opens a page of its own.
    #[test]
    fn repeats_notices_and_gaps() {
        let (c, cap) = responses(Mix::everything(), 3_000);
        let (&session, rs) = cap
            .responses
            .iter()
            .max_by_key(|(_, r)| r.len())
            .expect("responses");
        let numbered: Vec<&Vec<u8>> = rs
            .iter()
            .map(|x| &x.0)
            .filter(|p| resp_seq(p) != NOTICE_RESP_SEQ && p[17] & RESP_FLAG_RESEND == 0)
            .collect();
        assert!(numbered.len() > 20);
        let mut s = RspStore::new(c.sessions.iter().map(|x| x.session), 1 << 20);
        // From the 6th on, as a replay started from a snapshot would.
        for p in &numbered[5..10] {
            s.keep(session, resp_seq(p), p).unwrap();
        }
        assert_eq!(
            s.keep(session, resp_seq(numbered[7]), numbered[7]),
            Err(KeepError::Repeat)
        );
        assert_eq!(
            s.keep(99_999, 1, numbered[0]),
            Err(KeepError::UnknownSession)
        );
        // Skip 10..15.
        for p in &numbered[15..] {
            s.keep(session, resp_seq(p), p).unwrap();
        }
        let mut notice = numbered[0].to_vec();
        notice[8..16].copy_from_slice(&NOTICE_RESP_SEQ.to_le_bytes());
        s.keep(session, NOTICE_RESP_SEQ, &notice).unwrap();
        let k = s.counters();
        assert_eq!((k.refused, k.gaps, k.notices), (2, 1, 1), "{k:?}");
        let mut out = [0u8; RSP_PACKET_MAX];
        for (i, p) in numbered.iter().enumerate() {
            let got = s.rebuild(session, resp_seq(p), &mut out);
            if (5..10).contains(&i) || i >= 15 {
                let n = got.expect("held");
                assert_eq!(out[..n], as_rebuilt(p)[..]);
            } else {
                assert_eq!(got, None, "{i} not held");
            }
        }
        assert_eq!(s.range(session), Some((6, numbered.len() as u64)));
    }
}
