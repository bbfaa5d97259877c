//! Responses: built straight into wire bytes (missing-chapters §2 response packet, layout in
//! `docs/wire-messages.md`), numbered per session by `resp_seq`, tagged under `K_out`, and kept
//! in the lane's hot response ring for resends (07 §9.5).
//!
//! Hot path: no allocation. A response is built in a fixed buffer; the hot ring is one byte
//! arena plus one entry array, both allocated at construction; its index is a hash map
//! reserved to the most entries the ring can hold.

use vyrn_wire::msg::client::{
    siphash128, Record, SipKey, RESP_FLAG_RESEND, RESP_HDR_BYTES, RESP_MAX_RECORDS,
    RESP_RECORD_BYTES, RESP_TAG_BYTES,
};

/// Longest response packet: 40 records.
pub const RESP_MAX_BYTES: usize =
    RESP_HDR_BYTES + RESP_RECORD_BYTES * RESP_MAX_RECORDS + RESP_TAG_BYTES;

/// What a response waits for before it may leave (07 §4.11, INV-REP-11; §4.1, INV-REP-1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Gate {
    /// A lane answer of op `lane_seq`: leaves once `LaneCut[lane].cut ≥ lane_seq`.
    LaneCut {
        /// Lane.
        lane: u8,
        /// The op's (the packet's last) LaneSeq.
        lane_seq: u64,
    },
    /// An answer from step `step` (fills and every other book outcome): leaves once
    /// `released[A] ≥ need_a` and `released[B] ≥ need_b`.
    Step {
        /// StepId.
        step: u64,
        /// need_A(step).
        need_a: u64,
        /// need_B(step).
        need_b: u64,
    },
}

/// One finished response packet.
#[derive(Debug, Clone, Copy)]
pub struct RespOut<'a> {
    /// Session.
    pub session: u32,
    /// The request packet it answers (0: unsolicited).
    pub echo_pkt_seq: u32,
    /// The session's response number.
    pub resp_seq: u64,
    /// A resend (07 §9.5).
    pub resend: bool,
    /// Its gate.
    pub gate: Gate,
    /// The TX core of the session's client port (07 §4.1).
    pub tx: u8,
    /// The wire bytes. A live lane's carry their tag under `K_out`; a replay lane's carry 16
    /// zero bytes in its place: the tag is TX work, computed where a packet is sent (07 §7.3
    /// "no TX", §8.5 "no tag is stored"; [`tag`] or [`as_resend`] adds it).
    pub bytes: &'a [u8],
}

/// Builds one response packet in a fixed buffer.
#[derive(Debug)]
pub struct RespBuilder {
    buf: [u8; RESP_MAX_BYTES],
    n: usize,
}

impl Default for RespBuilder {
    fn default() -> Self {
        RespBuilder {
            buf: [0; RESP_MAX_BYTES],
            n: 0,
        }
    }
}

impl RespBuilder {
    /// Start a response (clears any previous one).
    pub fn start(&mut self, session: u32, echo_pkt_seq: u32) {
        self.buf[..RESP_HDR_BYTES].fill(0);
        self.buf[0..4].copy_from_slice(&session.to_le_bytes());
        self.buf[4..8].copy_from_slice(&echo_pkt_seq.to_le_bytes());
        self.n = 0;
    }

    /// Records so far.
    pub fn len(&self) -> usize {
        self.n
    }

    /// No record yet.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Full (40 records).
    pub fn is_full(&self) -> bool {
        self.n == RESP_MAX_RECORDS
    }

    /// Add a record. The caller keeps `len() < 40` and builds only valid records (the engine
    /// makes every record it sends from checked values); an invalid one is skipped and
    /// reported false.
    pub fn push(&mut self, r: &Record) -> bool {
        if self.is_full() {
            return false;
        }
        let off = RESP_HDR_BYTES + self.n * RESP_RECORD_BYTES;
        let Ok(slot) =
            <&mut [u8; RESP_RECORD_BYTES]>::try_from(&mut self.buf[off..off + RESP_RECORD_BYTES])
        else {
            return false;
        };
        if r.write_to(slot).is_err() {
            return false;
        }
        self.n += 1;
        true
    }

    /// Finish with `resp_seq` and the tag under `k_out` (`None`: 16 zero bytes in the tag's
    /// place, a replay lane's untagged packet); returns the wire bytes.
    pub fn finish(&mut self, resp_seq: u64, k_out: Option<&SipKey>) -> &[u8] {
        self.buf[8..16].copy_from_slice(&resp_seq.to_le_bytes());
        self.buf[16] = self.n as u8;
        self.buf[17] = 0;
        let body = RESP_HDR_BYTES + self.n * RESP_RECORD_BYTES;
        let tag = tag_of(k_out, &self.buf[..body]);
        self.buf[body..body + RESP_TAG_BYTES].copy_from_slice(&tag);
        &self.buf[..body + RESP_TAG_BYTES]
    }
}

/// A response body's tag under `k_out`; 16 zero bytes without a key (a replay lane's).
fn tag_of(k_out: Option<&SipKey>, body: &[u8]) -> [u8; RESP_TAG_BYTES] {
    k_out.map_or([0; RESP_TAG_BYTES], |k| siphash128(k, body))
}

/// Tag a finished response packet under `k_out` in place (its last 16 bytes): what a sender
/// does to a replay lane's untagged packet (07 §8.5: rebuilt, then tagged with `K_out`).
/// A packet shorter than its tag is left as it is.
pub fn tag(bytes: &mut [u8], k_out: &SipKey) {
    let Some(body) = bytes.len().checked_sub(RESP_TAG_BYTES) else {
        return;
    };
    let t = tag_of(Some(k_out), &bytes[..body]);
    bytes[body..].copy_from_slice(&t);
}

/// Copy `stored` into `out` as a resend: `flags.resend` set and the tag recomputed under
/// `k_out` (`None`: zeroed, a replay lane's untagged resend).
pub fn as_resend<'a>(
    stored: &[u8],
    k_out: Option<&SipKey>,
    out: &'a mut [u8; RESP_MAX_BYTES],
) -> &'a [u8] {
    let n = stored.len();
    out[..n].copy_from_slice(stored);
    out[17] = RESP_FLAG_RESEND;
    let body = n - RESP_TAG_BYTES;
    let tag = tag_of(k_out, &out[..body]);
    out[body..n].copy_from_slice(&tag);
    &out[..n]
}

const NONE: u64 = u64::MAX;

#[derive(Debug, Clone, Copy)]
struct Entry {
    off: u32,
    len: u16,
    slot: u16,
    pkt_seq: u32,
    /// Global index of the previous live entry with the same (slot, pkt_seq), or NONE.
    prev: u64,
}

/// How many of each session's most recent packets the hot ring can find again (a direct-mapped
/// index per session: `pkt_seq % RESEND_WINDOW`). A duplicate further back, or older than the
/// ring's bytes, is answered `RESEND_GONE` (07 §8.5: the recovery service may hold it).
pub const RESEND_WINDOW: usize = 256;

#[derive(Debug, Clone, Copy)]
struct Slot {
    pkt_seq: u32,
    newest: u64,
}

/// The lane's hot response ring (01 §14.6's 8 s ring, sized in bytes here): every response the
/// lane produced, oldest evicted first, found again by `(slot, echo_pkt_seq)` for a resend.
/// No hashing: the index is one row of [`RESEND_WINDOW`] entries per bound session slot, and
/// eviction never touches it (a lookup checks the entry is still held).
#[derive(Debug)]
pub struct HotRing {
    arena: Vec<u8>,
    entries: Vec<Entry>,
    head: u64,
    tail: u64,
    write: usize,
    /// slot → row in `index` (u32::MAX: unbound).
    row: Vec<u32>,
    index: Vec<Slot>,
    /// Per slot: pkt_seqs below this are no longer resendable (their responses were evicted).
    floor: Vec<u32>,
}

/// Shortest response (one record) — bounds how many entries the arena can hold.
const RESP_MIN_BYTES: usize = RESP_HDR_BYTES + RESP_RECORD_BYTES + RESP_TAG_BYTES;

impl HotRing {
    /// A ring of `bytes` bytes for a lane whose bound session slots are `slots` (each
    /// < `MAX_SESSIONS_PER_LANE`).
    pub fn new(bytes: usize, slots: &[u16]) -> Self {
        let bytes = bytes.max(RESP_MAX_BYTES * 2);
        // A power of two: an entry's place is a mask, not a division (three per response).
        let n = (bytes / RESP_MIN_BYTES + 1).next_power_of_two();
        let max_slot = slots.iter().copied().max().map_or(0, |m| m as usize + 1);
        let mut row = vec![u32::MAX; max_slot];
        for (i, &s) in slots.iter().enumerate() {
            row[s as usize] = i as u32;
        }
        HotRing {
            arena: vec![0; bytes],
            entries: vec![
                Entry {
                    off: 0,
                    len: 0,
                    slot: 0,
                    pkt_seq: 0,
                    prev: NONE,
                };
                n
            ],
            head: 0,
            tail: 0,
            write: 0,
            row,
            index: vec![
                Slot {
                    pkt_seq: 0,
                    newest: NONE
                };
                slots.len() * RESEND_WINDOW
            ],
            floor: vec![0; max_slot],
        }
    }

    /// Touch every page the ring owns (startup: no page fault on the hot path later).
    pub fn prefault(&mut self) {
        self.arena.fill(0);
        for e in self.entries.iter_mut() {
            e.prev = NONE;
        }
        for e in self.index.iter_mut() {
            e.newest = NONE;
        }
    }

    fn cell(&self, slot: u16, pkt_seq: u32) -> Option<usize> {
        let r = *self.row.get(slot as usize)?;
        (r != u32::MAX).then(|| r as usize * RESEND_WINDOW + pkt_seq as usize % RESEND_WINDOW)
    }

    /// Whether the responses of `(slot, pkt_seq)` can no longer be found: evicted from the
    /// ring, or pushed out of the session's index window by newer packets.
    pub fn gone(&self, slot: u16, pkt_seq: u32) -> bool {
        if pkt_seq < self.floor(slot) {
            return true;
        }
        self.cell(slot, pkt_seq)
            .is_some_and(|c| self.index[c].newest != NONE && self.index[c].pkt_seq > pkt_seq)
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        (self.head - self.tail) as usize
    }

    /// Nothing held.
    pub fn is_empty(&self) -> bool {
        self.head == self.tail
    }

    /// The oldest pkt_seq of `slot` whose responses may still be held (those below were evicted).
    pub fn floor(&self, slot: u16) -> u32 {
        self.floor.get(slot as usize).copied().unwrap_or(0)
    }

    /// Entry `i`'s place (the entries are a power of two).
    fn at(&self, i: u64) -> usize {
        (i & (self.entries.len() as u64 - 1)) as usize
    }

    fn evict_one(&mut self) {
        let e = self.entries[self.at(self.tail)];
        if let Some(f) = self.floor.get_mut(e.slot as usize) {
            *f = (*f).max(e.pkt_seq.saturating_add(1));
        }
        self.tail += 1;
    }

    /// Keep a response of `(slot, pkt_seq)` (`pkt_seq` 0: unsolicited, kept for order only).
    pub fn push(&mut self, slot: u16, pkt_seq: u32, bytes: &[u8]) {
        let len = bytes.len();
        debug_assert!(len <= RESP_MAX_BYTES);
        let n = self.entries.len() as u64;
        if self.write + len > self.arena.len() {
            // Wrap: every entry at or past the old write point is from the previous lap and
            // the oldest held; they go first.
            let old = self.write;
            while self.tail < self.head && self.entries[self.at(self.tail)].off as usize >= old {
                self.evict_one();
            }
            self.write = 0;
        }
        let (lo, hi) = (self.write, self.write + len);
        while self.tail < self.head {
            let e = self.entries[self.at(self.tail)];
            let (eo, eh) = (e.off as usize, e.off as usize + e.len as usize);
            if self.head - self.tail >= n || (eo < hi && lo < eh) {
                self.evict_one();
            } else {
                break;
            }
        }
        self.arena[lo..hi].copy_from_slice(bytes);
        let cell = self.cell(slot, pkt_seq);
        let prev = match cell {
            Some(c) if self.index[c].pkt_seq == pkt_seq => self.index[c].newest,
            _ => NONE,
        };
        let at = self.at(self.head);
        self.entries[at] = Entry {
            off: lo as u32,
            len: len as u16,
            slot,
            pkt_seq,
            prev,
        };
        if let Some(c) = cell {
            self.index[c] = Slot {
                pkt_seq,
                newest: self.head,
            };
        }
        self.head += 1;
        self.write = hi;
    }

    /// Every held response of `(slot, pkt_seq)`, newest first, into `f` (a client orders
    /// resends by `resp_seq`). Returns how many.
    pub fn find(&self, slot: u16, pkt_seq: u32, mut f: impl FnMut(&[u8])) -> usize {
        let Some(c) = self.cell(slot, pkt_seq) else {
            return 0;
        };
        if self.index[c].pkt_seq != pkt_seq {
            return 0;
        }
        let mut k = 0;
        let mut i = self.index[c].newest;
        while i != NONE && i >= self.tail {
            let e = self.entries[self.at(i)];
            if e.slot != slot || e.pkt_seq != pkt_seq {
                break;
            }
            f(&self.arena[e.off as usize..e.off as usize + e.len as usize]);
            k += 1;
            i = e.prev;
        }
        k
    }
}
