//! The replica's data side (07 §5.3–§5.7, §6.1 `data_root`, §6.4 item 3): data frames from
//! every data box, the replica's own data store, the join of PacketRecords with payloads, the
//! fetch of what is missing, the three copy mismatches and each block's `data_root`.
//!
//! A tile with no socket: [`DataSide::on_data_frame`] per data-frame datagram,
//! [`DataSide::on_fetched`] per packet a peer replica or the sequencer sent back,
//! [`DataSide::on_record`], [`DataSide::on_hash`] and [`DataSide::on_mark`] from the decoder,
//! [`DataSide::on_hash_list`] for the order hasher's `HashList` parts, [`DataSide::tick`] every
//! few µs. Everything that leaves goes through [`DataOut`]. The verdict asks
//! [`DataSide::block_payloads`], [`DataSide::data_root`] and [`DataSide::check_data_root`].
//!
//! - **Per data box** (07 §5.3): frames of another book or epoch, or naming another box, are
//!   refused ([`DataRefused`]); `data_seq` gaps are fetched by `DataFetch::Range` from that box;
//!   a `DATA_HB` names the box's last DATA frame (`vyrn-data`'s fan-out), so a lost last frame
//!   is a gap too; a box silent REP_DATA_SILENCE_MS is down ([`DataAlarm::BoxDown`], detection
//!   only: `DataDown` gossip and the redirect of §5.7 are later).
//! - **Store** (07 §5.4): every packet is parsed with `vyrn_wire`'s request codec and its full
//!   BLAKE3 is computed here, never taken from a data box; payloads are kept by
//!   `(session, pkt_seq)`, bounded in packets, bytes and age (REP_DATA_RING_S), oldest first.
//! - **Join** (07 §5.4): a record is resolved when a payload with its key is present, its 8-byte
//!   hash equals `pkt_hash` and its message count equals `count`; before the HashRun it is
//!   matched on the key only ([`RecState::Unhashed`]); Advance records never join.
//! - **Fetch** (07 §5.5): REP_DATA_WAIT_US after its ORDER frame an unresolved record asks the
//!   session's data home, then one peer (round robin), then the sequencer, one source per
//!   `fetch_step_ns`; a fetched packet is checked like a pushed one.
//! - **Mismatch** (07 §5.6): a copy whose hash or count differs makes the record wait for the
//!   sequencer's copy, which is canonical when it matches; then `CopyMismatch` evidence. A
//!   `data_root` that differs with matching 8-byte hashes asks for the block's `HashList` and
//!   compares it entry by entry.
//!
//! Bad input never panics: a refused frame or packet is counted ([`DataCounters`]) and returns
//! a typed reason. Memory is bounded: the store by [`DataConfig`], the gaps per box by
//! [`GAPS_MAX`], the records by `records_max`.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap, VecDeque};

use vyrn_wire::consts::{REP_DATA_RING_S, REP_DATA_SILENCE_MS, REP_DATA_WAIT_US};
use vyrn_wire::error::Malformed;
use vyrn_wire::header::{data_root, empty_root, DataRootHasher, Hash};
use vyrn_wire::msg::client::{pkt_hash_of, ReqReject, Request, REQ_MAX_LEN};
use vyrn_wire::msg::ctrl::{DataFetch, HashList, HashListReq, HASH_LIST_PART_MAX};
use vyrn_wire::msg::data::{DataFrame, DataKind};
use vyrn_wire::msg::PktKey;
use vyrn_wire::records::PacketRecord;

/// Most open `data_seq` gaps remembered per data box; past it the oldest is forgotten (its
/// packets still come by the per-record fetch of 07 §5.5).
pub const GAPS_MAX: usize = 1024;
/// Most frames one gap asks for: a longer gap asks for its newest `GAP_FRAMES_MAX` frames.
pub const GAP_FRAMES_MAX: u64 = 4096;
/// Frames per `DataFetch::Range`: what a data box answers per request (`vyrn-data`
/// `FETCH_RANGE_MAX`).
pub const FETCH_RANGE_FRAMES: u64 = 64;
/// How far past the newest `data_seq` a frame may be: further is a broken or hostile sender.
pub const DATA_AHEAD_MAX: u64 = 1 << 20;
/// Requests to the sequencer per record before it is unavailable (07 §5.6 "cannot be fetched").
pub const SEQ_TRIES: u8 = 3;
/// Key fetches to data homes per `fetch_step_ns`, all boxes together: a replica that starts
/// behind (a restart, a long outage) has thousands of records to fetch at once, and asking for
/// all of them in one burst overflows the data box's answer queue and this replica's socket
/// (measured: a restarted replica asked 26k keys at once, its data box dropped 3.8k answers).
/// Records over the pace keep their stage and are asked at the next step.
pub const FETCH_KEYS_PER_STEP: u64 = 256;
/// Fetches by key (of any source) whose answer has not come yet, at most: each answer is a
/// datagram into this replica's sockets, so a replica that starts far behind (a restart, a lost
/// consensus partition) and asks thousands of keys at once overflowed its own socket buffers —
/// measured: 48,028 key answers sent by the data box, 11,622 received, every lost one asked
/// again of a peer and the sequencer, the storm never drained and the replica never caught up.
/// A window keeps the answers within what the socket holds; an ask frees its place when its
/// answer resolves the record or its fetch step expires.
pub const FETCH_IN_FLIGHT_MAX: u64 = 1024;
/// Asks in flight per extra fetch step a source gets before the next source is asked.
pub const FETCH_STEP_STRETCH: u64 = 64;
/// An unavailable record is asked again from its data home this long after its last source
/// said nothing (the payload may reach a data box late; 07 §5.5 gives no source after the
/// sequencer): its block waits, it is not forgotten.
pub const UNAVAILABLE_RETRY_NS: u64 = 100_000_000;
/// Distinct copies a data box may add for one key beside its first without a record asking for
/// them: the records a box logs under one `(session, pkt_seq)` each carry the hash of the packet
/// they name (`docs/wire.md` "What the box logs"), so each needs its own copy; past this many
/// unasked ones the client is hostile, and a record's own copy is stored when it comes (from
/// the sequencer's retention, 07 §5.5 source 3), bounded by the records.
pub const EXTRA_COPIES_MAX: usize = 3;
/// Most data boxes (`n_data` is 4 or 5, 07 §5.1; the index is a u8).
pub const BOXES_MAX: usize = 16;

/// Timing of the data side (07 §5.3, §5.5; budgets, overridable by config).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataTiming {
    /// REP_DATA_WAIT_US: a record unresolved this long after its ORDER frame is fetched.
    pub wait_ns: u64,
    /// Time each fetch source gets before the next one is asked (project choice: the same
    /// REP_DATA_WAIT_US).
    pub fetch_step_ns: u64,
    /// REP_DATA_SILENCE_MS: a data box silent this long is down (07 §5.7).
    pub silence_ns: u64,
    /// REP_DATA_RING_S: payloads older than this leave the store.
    pub store_age_ns: u64,
}

impl Default for DataTiming {
    fn default() -> Self {
        DataTiming {
            wait_ns: REP_DATA_WAIT_US * 1000,
            fetch_step_ns: REP_DATA_WAIT_US * 1000,
            silence_ns: REP_DATA_SILENCE_MS * 1_000_000,
            store_age_ns: REP_DATA_RING_S * 1_000_000_000,
        }
    }
}

/// What the data side takes and how much it keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataConfig {
    /// Book (frames and packets of another book are refused).
    pub book: u16,
    /// Low 16 bits of the epoch (07 §5.3 `epoch16`).
    pub epoch16: u16,
    /// Data boxes (`REP_Membership.data_boxes`), at most [`BOXES_MAX`].
    pub n_boxes: u8,
    /// Peer replicas to fetch from (round robin), 0 for none.
    pub n_peers: usize,
    /// Substreams: 1 or 2.
    pub n_streams: u8,
    /// Most payloads kept.
    pub store_max_pkts: usize,
    /// Most payload bytes kept.
    pub store_max_bytes: usize,
    /// Most PacketRecords tracked (all substreams, until [`DataSide::release_through`]).
    pub records_max: usize,
    /// Timing.
    pub timing: DataTiming,
}

impl DataConfig {
    /// A config with the default bounds (1M payloads, 256 MiB, 4M records) and timing.
    pub fn new(book: u16, epoch16: u16, n_boxes: u8, n_peers: usize, n_streams: u8) -> Self {
        DataConfig {
            book,
            epoch16,
            n_boxes,
            n_peers,
            n_streams,
            store_max_pkts: 1 << 20,
            store_max_bytes: 256 << 20,
            records_max: 4 << 20,
            timing: DataTiming::default(),
        }
    }
}

/// Where a packet came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Source {
    /// Data box `d`: pushed (DATA) or fetched (FETCH_RESP) — the client's copy 2.
    Box(u8),
    /// Peer replica (an answer to `PeerDataFetch`).
    Peer(usize),
    /// The sequencer's control core (an answer to `SeqDataReq`): the bytes it matched.
    Seq,
}

/// Why a data-frame datagram was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataRefused {
    /// Not a data frame (`DataFrame::parse`).
    Malformed(Malformed),
    /// Another book.
    OtherBook,
    /// Another epoch.
    OtherEpoch,
    /// A box index outside the membership, or a header `src` other than the sending box.
    BadSource,
    /// A `data_seq` more than [`DATA_AHEAD_MAX`] past the newest.
    TooFarAhead,
}

impl DataRefused {
    fn index(self) -> usize {
        match self {
            DataRefused::Malformed(_) => 0,
            DataRefused::OtherBook => 1,
            DataRefused::OtherEpoch => 2,
            DataRefused::BadSource => 3,
            DataRefused::TooFarAhead => 4,
        }
    }
}

/// Why one packet was not stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PktRefused {
    /// Not a request packet (`Request::parse`).
    Malformed(ReqReject),
    /// A packet of another book.
    OtherBook,
    /// A fetched packet no unresolved record asks for.
    Unsolicited,
    /// A fetched packet whose hash or count differs from its record's (07 §5.5: checked like a
    /// pushed one), or a sequencer copy that does not match the HashList entry.
    Wrong,
    /// A copy of a stored payload (the same full hash), or a second, different data-box copy
    /// (the first is kept; only the sequencer's copy replaces it).
    Duplicate,
}

impl PktRefused {
    fn index(self) -> usize {
        match self {
            PktRefused::Malformed(_) => 0,
            PktRefused::OtherBook => 1,
            PktRefused::Unsolicited => 2,
            PktRefused::Wrong => 3,
            PktRefused::Duplicate => 4,
        }
    }
}

/// Why a decoder input was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordRefused {
    /// A substream this layout does not have.
    BadStream,
    /// `records_max` records are tracked: release finished blocks first.
    Full,
    /// A BlockMark height not above the substream's last.
    HeightOrder,
    /// A hash for a record not tracked, or already hashed.
    UnknownRecord,
}

/// Where a record stands (07 §5.4–§5.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecState {
    /// An Advance record: no payload, never joined.
    Advance,
    /// No payload with its key.
    Missing,
    /// A payload with its key and count, its HashRun not yet in (07 §5.4 "unhashed").
    Unhashed,
    /// Joined: key, 8-byte hash and count match (and the HashList entry, after a root check).
    Resolved,
    /// The copy held differs (hash, count, or full hash against the HashList): waiting for the
    /// sequencer's canonical copy (07 §5.6).
    Mismatch,
    /// Every source was asked and none gave a matching copy (07 §5.6: unavailable). A matching
    /// copy that still arrives resolves it.
    Unavailable,
}

/// An alarm or a change of a data box's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataAlarm {
    /// Data box `d` silent REP_DATA_SILENCE_MS (07 §5.7); `last_rx_ns` is its last frame.
    BoxDown {
        /// The box.
        d: u8,
        /// When its last frame came.
        last_rx_ns: u64,
    },
    /// Data box `d` sends again.
    BoxUp {
        /// The box.
        d: u8,
    },
    /// No source gave a matching copy of `key` (07 §5.6: the packet is unavailable).
    Unavailable {
        /// The packet.
        key: PktKey,
    },
    /// The order hasher's HashList of `height` contradicts its header's `data_root` or this
    /// replica's records (07 §5.6 row 2; the verdict returns false).
    HashListBad {
        /// Height.
        height: u64,
    },
}

/// `CopyMismatch{session, pkt_seq, seq_hash, data_hash}` (07 §5.6): the client's two copies
/// differ. `seq_hash` is the full hash of the sequencer's (canonical) copy, `data_hash` that of
/// the data box's. `vyrn_wire` has no encoding of it yet: this is the evidence, not a format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CopyMismatch {
    /// SessionId.
    pub session: u32,
    /// pkt_seq.
    pub pkt_seq: u32,
    /// Full BLAKE3 of the sequencer's copy.
    pub seq_hash: Hash,
    /// Full BLAKE3 of the data box's copy.
    pub data_hash: Hash,
}

/// Where the data side's output goes.
pub trait DataOut {
    /// A `DataFetch` to data box `d` (a `data_seq` range, 07 §5.3; or a key, §5.5 source 1).
    fn data_fetch(&mut self, d: u8, f: &DataFetch);
    /// `PeerDataFetch` of `key` to peer replica `peer` (07 §5.5 source 2); `pkt_hash` names the
    /// copy (0 before the record's HashRun).
    fn peer_data_fetch(&mut self, peer: usize, key: PktKey, pkt_hash: u64);
    /// `SeqDataReq` of `key` to the sequencer's control core (07 §5.5 source 3); `pkt_hash`
    /// names the copy (0 before the record's HashRun).
    fn seq_data_req(&mut self, key: PktKey, pkt_hash: u64);
    /// `HashListReq` to the order hasher (07 §5.6 row 2).
    fn hash_list_req(&mut self, r: &HashListReq);
    /// `CopyMismatch` evidence with both packets (07 §5.6): to the sequencer's control core.
    fn copy_mismatch(&mut self, e: &CopyMismatch, seq_pkt: &[u8], data_pkt: &[u8]);
    /// An alarm.
    fn alarm(&mut self, a: DataAlarm);
    /// The record of `lane` starting at `first_lane_seq` resolved (07 §5.4): `bytes` is the
    /// copy whose full hash judged equal to its `pkt_hash`, count equal. Called once per record,
    /// after its HashRun (a record resolves only once its `pkt_hash` is known). Replay on its
    /// own core takes its payloads from here (`replay_tile`); inline replay reads the store in
    /// place and ignores it.
    #[inline]
    fn resolved(&mut self, _lane: u8, _first_lane_seq: u64, _bytes: &[u8]) {}
}

/// Sends and raises nothing (benches and tests that look at the data side's own state).
#[derive(Debug, Default, Clone, Copy)]
pub struct NullDataOut;
impl DataOut for NullDataOut {
    fn data_fetch(&mut self, _d: u8, _f: &DataFetch) {}
    fn peer_data_fetch(&mut self, _peer: usize, _key: PktKey, _h: u64) {}
    fn seq_data_req(&mut self, _key: PktKey, _h: u64) {}
    fn hash_list_req(&mut self, _r: &HashListReq) {}
    fn copy_mismatch(&mut self, _e: &CopyMismatch, _s: &[u8], _d: &[u8]) {}
    fn alarm(&mut self, _a: DataAlarm) {}
}

/// Counters (one writer: the tile).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DataCounters {
    /// Frames taken: DATA, DATA_HB, FETCH_RESP.
    pub frames: [u64; 3],
    /// Frames refused: malformed, other book, other epoch, bad source, too far ahead.
    pub refused: [u64; 5],
    /// DATA frames at or below the newest `data_seq` and in no gap (packets still taken).
    pub frames_stale: u64,
    /// Gaps opened.
    pub gaps: u64,
    /// `DataFetch::Range` requests sent.
    pub gap_fetches: u64,
    /// Gaps longer than [`GAP_FRAMES_MAX`] (only the newest frames asked).
    pub gap_clamped: u64,
    /// Gaps forgotten past [`GAPS_MAX`].
    pub gaps_dropped: u64,
    /// Missing frames that came (late or by FETCH_RESP).
    pub gap_filled: u64,
    /// Boxes marked down / up again.
    pub box_down: u64,
    /// Boxes heard again after down.
    pub box_up: u64,
    /// Packets seen in frames and fetch answers.
    pub pkts: u64,
    /// Packets stored.
    pub pkts_stored: u64,
    /// Packets refused: malformed, other book, unsolicited, wrong, duplicate.
    pub pkts_refused: [u64; 5],
    /// Payloads evicted for age.
    pub evicted_age: u64,
    /// Payloads evicted for room (packets or bytes).
    pub evicted_room: u64,
    /// PacketRecords taken (Advance included).
    pub records: u64,
    /// Advance records.
    pub records_advance: u64,
    /// Records refused (bad stream, full).
    pub records_refused: u64,
    /// Records whose key an earlier live record already has.
    pub dup_key_records: u64,
    /// Hashes attached.
    pub hashes: u64,
    /// Hashes refused (unknown record).
    pub hashes_refused: u64,
    /// Records resolved.
    pub resolved: u64,
    /// Joins where the 8-byte hash differed.
    pub mismatch_hash: u64,
    /// Joins where the count differed.
    pub mismatch_count: u64,
    /// Fetches by key to a data home.
    pub fetch_home: u64,
    /// Fetches to a peer.
    pub fetch_peer: u64,
    /// Requests to the sequencer.
    pub fetch_seq: u64,
    /// Fetched packets that resolved a record.
    pub fetched_ok: u64,
    /// Records that became unavailable.
    pub unavailable: u64,
    /// Key fetches held back by the pace ([`FETCH_KEYS_PER_STEP`]).
    pub fetch_paced: u64,
    /// Unavailable records asked again ([`UNAVAILABLE_RETRY_NS`]).
    pub unavailable_retries: u64,
    /// Payloads past the ring's age kept for a live record (released with its block).
    pub age_pinned: u64,
    /// Data boxes whose frames before the first one seen were fetched as a gap (this replica
    /// started after them).
    pub history_gaps: u64,
    /// CopyMismatch evidence emitted.
    pub copy_mismatch: u64,
    /// Wrong copies from a peer replaced by the sequencer's (no evidence: not the client's).
    pub peer_copy_replaced: u64,
    /// Distinct copies stored beside a key's first (a conflicting duplicate, or a client's
    /// copies that differ).
    pub copies_extra: u64,
    /// Distinct copies refused past [`EXTRA_COPIES_MAX`] for one key.
    pub copies_refused: u64,
    /// HashListReqs sent.
    pub hash_list_reqs: u64,
    /// HashList parts taken.
    pub hash_list_parts: u64,
    /// HashList parts refused (unsolicited, bad stream, wrong shape).
    pub hash_list_refused: u64,
    /// HashLists that contradict the header or the records.
    pub hash_list_bad: u64,
    /// Records whose full hash differs from the HashList entry.
    pub root_mismatch_entries: u64,
}

/// A block's payload state (07 §6.4 item 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockPayloads {
    /// No BlockMark of this height on every substream (or released).
    Unknown,
    /// Some records are not resolved: how many in each state.
    Pending {
        /// Missing payloads (and unavailable ones).
        missing: usize,
        /// Waiting for their HashRun.
        unhashed: usize,
        /// Waiting for the sequencer's copy.
        mismatch: usize,
    },
    /// Every PacketRecord resolved.
    Ready,
}

/// A block's `data_root` and its substream halves (07 §6.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockDataRoot {
    /// `BLAKE3(data_root_A ‖ data_root_B)`.
    pub data_root: Hash,
    /// `data_root_A`, `data_root_B` (BLAKE3 of nothing with one substream).
    pub halves: [Hash; 2],
}

/// The answer of [`DataSide::check_data_root`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RootCheck {
    /// Every record resolved and the root equals the header's.
    Match,
    /// Payloads, a HashList or canonical copies are still awaited.
    Pending,
    /// The HashList contradicts the header or the records: the vote is false (07 §6.4).
    Contradiction,
}

/// A client packet held inline: at most REQ_MAX_LEN bytes, all `Request::parse` accepts. The
/// store's slots are fixed-size, so storing a payload allocates nothing (a boxed copy per
/// packet was an allocation and, on a fresh page, a page fault per message on the data path,
/// `--bench replica` at the peak mix, 2026-12-03).
#[derive(Clone)]
struct PktBuf {
    len: u8,
    buf: [u8; REQ_MAX_LEN],
}

impl PktBuf {
    /// `b` held inline; `None` past REQ_MAX_LEN.
    #[cfg(test)]
    fn new(b: &[u8]) -> Option<Self> {
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
struct Payload<B = PktBuf> {
    bytes: B,
    full: Hash,
    count: u8,
    origin: Source,
    t: u64,
    gen: u64,
}

/// A stored payload's slot: what the join reads (the count and full hash), apart from the
/// bytes, which only replay and the repair servers read. The join walks ~64-byte slots, not
/// ~270-byte ones (the bytes inline in the slot made core 3 1.4× slower at the peak mix,
/// `--bench replica`, 2026-12-03).
#[derive(Debug, Clone)]
struct Stored {
    full: Hash,
    count: u8,
    len: u8,
    origin: Source,
    t: u64,
    gen: u64,
}

/// A stored payload as the store hands it out: its slot and its bytes.
struct PayloadRef<'a> {
    m: &'a Stored,
    bytes: &'a [u8],
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
struct Store {
    /// Each key's first copy.
    map: HashMap<PktKey, u32, Seeded>,
    /// The other distinct copies of a key, at most [`EXTRA_COPIES_MAX`] (a conflicting duplicate
    /// the box logged, or a client whose two copies differ: `docs/wire.md` "What the box
    /// logs"). Empty unless a client misbehaves.
    extra: HashMap<PktKey, Vec<u32>, Seeded>,
    /// Copies held in `extra`.
    n_extra: usize,
    slots: Vec<Option<Stored>>,
    /// Each slot's bytes (the first `len`), beside `slots`.
    bufs: Vec<[u8; REQ_MAX_LEN]>,
    /// Empty slots, reused newest first.
    free: Vec<u32>,
    order: VecDeque<(PktKey, u64)>,
    bytes: usize,
    next_gen: u64,
    /// Payloads past the age of the ring that a live record still needs (its block not yet
    /// voted and replayed): out of `order`, dropped when their records are released.
    pinned: std::collections::HashSet<PktKey, Seeded>,
    /// The newest payloads of each session by `pkt_seq`, in front of `map`.
    recent: Recent,
}

/// Entries per session in [`Recent`]: a few ms of one busy session's packets.
const RECENT_SLOTS: usize = 256;
/// Sessions [`Recent`] keeps a table for (2 KiB each); the rest use the map alone.
const RECENT_SESSIONS_MAX: usize = 4096;

/// A direct-mapped table per session, `pkt_seq mod RECENT_SLOTS → (pkt_seq, slot + 1)`, in
/// front of the store's map. A session's `pkt_seq`s come in order, so the join (core 3) and
/// replay's reads walk each session's table in order: one cache line per 8 records where the
/// map's probe touches its control bytes and a bucket at random, two misses a record (`--bench
/// replica`, core 3 at the peak mix, 2026-12-03). Every entry names the slot its key has in
/// `map` (kept so by [`Store::insert`] and [`Store::remove`]); a key that is not here may still
/// be in `map`.
#[derive(Debug, Default)]
struct Recent {
    at: HashMap<u32, u32, Seeded>,
    /// Session `at[s]`'s table is `rings[at[s] * RECENT_SLOTS..][..RECENT_SLOTS]`.
    rings: Vec<(u32, u32)>,
}

impl Recent {
    fn get(&self, k: &PktKey) -> Option<u32> {
        let &r = self.at.get(&k.session)?;
        let (seq, s) = *self.rings.get(Self::at(r, k))?;
        (s != 0 && seq == k.pkt_seq).then(|| s - 1)
    }

    fn put(&mut self, k: &PktKey, slot: u32) {
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

    fn at(r: u32, k: &PktKey) -> usize {
        r as usize * RECENT_SLOTS + k.pkt_seq as usize % RECENT_SLOTS
    }

    /// `k` left slot `slot`.
    fn clear(&mut self, k: &PktKey, slot: u32) {
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
type Seeded = vyrn_engine::hash::SeededState;

/// The newest live record of each key, `(session, pkt_seq) → (stream, rid)`: a direct-mapped
/// table per session (`pkt_seq mod RECENT_SLOTS`) with a map for the keys whose entry is taken
/// (more than RECENT_SLOTS live records of one session, or sessions past
/// RECENT_SESSIONS_MAX). Core 3 inserts one key per record; a session's keys come in order,
/// so the inserts walk its table in order instead of writing a random bucket of a map sized for
/// every live record (a cache miss per record, `--bench replica`, core 3 at the peak mix,
/// 2026-12-03). A key is in the table or the map, never both.
#[derive(Debug, Default)]
struct RecIndex {
    at: HashMap<u32, u32, Seeded>,
    /// `(pkt_seq, stream + 1, rid)`; stream 0 marks an empty entry.
    rings: Vec<(u32, u8, u64)>,
    spill: HashMap<PktKey, (u8, u64), Seeded>,
}

impl RecIndex {
    fn pos(&self, k: &PktKey) -> Option<usize> {
        let &r = self.at.get(&k.session)?;
        Some(r as usize * RECENT_SLOTS + k.pkt_seq as usize % RECENT_SLOTS)
    }

    fn get(&self, k: &PktKey) -> Option<(u8, u64)> {
        if let Some(&(seq, s1, rid)) = self.pos(k).and_then(|p| self.rings.get(p)) {
            if s1 != 0 && seq == k.pkt_seq {
                return Some((s1 - 1, rid));
            }
        }
        self.spill.get(k).copied()
    }

    /// Insert, returning the key's previous value.
    fn insert(&mut self, k: PktKey, v: (u8, u64)) -> Option<(u8, u64)> {
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
    fn remove_if(&mut self, k: &PktKey, v: (u8, u64)) -> bool {
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

    fn contains_key(&self, k: &PktKey) -> bool {
        self.get(k).is_some()
    }

    fn reserve(&mut self, n: usize) {
        self.spill.reserve(n / 16);
        self.rings.reserve(PREFAULT_SESSIONS * RECENT_SLOTS);
        self.at.reserve(PREFAULT_SESSIONS);
    }
}

/// A payload's slot and the bytes it keeps: at most REQ_MAX_LEN (a longer payload never gets
/// here, `Request::parse` refused it).
fn stored_of<B: std::ops::Deref<Target = [u8]>>(p: &Payload<B>) -> (Stored, &[u8]) {
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
fn alloc_slot(
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
    fn primary(&self, k: &PktKey) -> Option<u32> {
        match self.recent.get(k) {
            Some(i) => Some(i),
            None => self.map.get(k).copied(),
        }
    }

    fn slot(&self, i: u32) -> Option<PayloadRef<'_>> {
        let i = i as usize;
        let m = self.slots.get(i)?.as_ref()?;
        Some(PayloadRef {
            m,
            bytes: self.bufs.get(i)?.get(..m.len as usize)?,
        })
    }

    /// `k`'s first copy.
    fn get(&self, k: &PktKey) -> Option<PayloadRef<'_>> {
        self.slot(self.primary(k)?)
    }

    /// Every copy of `k`, the first one first.
    fn copies<'a>(&'a self, k: &PktKey) -> impl Iterator<Item = (u32, PayloadRef<'a>)> + 'a {
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
    fn get_hashed(&self, k: &PktKey, h: u64) -> Option<PayloadRef<'_>> {
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
    fn get_full(&self, k: &PktKey, full: &Hash) -> Option<PayloadRef<'_>> {
        self.copies(k)
            .find(|(_, q)| q.full == *full)
            .map(|(_, q)| q)
    }

    /// The copy a record of `k` reads: the one with its hash once it has one, else the first.
    fn get_for(&self, k: &PktKey, h: Option<u64>) -> Option<PayloadRef<'_>> {
        match h {
            Some(h) => self.get_hashed(k, h),
            None => self.get(k),
        }
    }

    fn len(&self) -> usize {
        self.map.len() + self.n_extra
    }

    /// A free slot holding `m` and the bytes `b`.
    fn alloc(&mut self, m: Stored, b: &[u8]) -> u32 {
        alloc_slot(&mut self.free, &mut self.slots, &mut self.bufs, m, b)
    }

    /// Another distinct copy of `k`, beside its first.
    fn insert_extra(&mut self, k: PktKey, p: Payload<&[u8]>) {
        let (m, b) = stored_of(&p);
        self.bytes += b.len();
        let i = self.alloc(m, b);
        self.extra.entry(k).or_default().push(i);
        self.n_extra += 1;
    }

    /// Overwrite slot `i` (a copy of some key) with `p`, its index entries kept.
    fn replace(&mut self, i: u32, p: Payload<&[u8]>) {
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
    fn insert<B: std::ops::Deref<Target = [u8]>>(&mut self, k: PktKey, p: Payload<B>) {
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
    fn remove_slot(&mut self, k: &PktKey, i: u32) -> Option<Payload> {
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
    fn remove(&mut self, k: &PktKey) -> Option<Payload> {
        let i = self.primary(k)?;
        self.remove_slot(k, i)
    }

    /// Take every copy of `k` out of the store.
    fn remove_all(&mut self, k: &PktKey) {
        while let Some(i) = self.primary(k) {
            if self.remove_slot(k, i).is_none() {
                break;
            }
        }
    }

    /// The slot of the copy of `k` stored as generation `gen`.
    fn slot_of_gen(&self, k: &PktKey, gen: u64) -> Option<u32> {
        self.copies(k).find(|(_, p)| p.gen == gen).map(|(i, _)| i)
    }

    /// Pop the oldest live entry (stale order entries of replaced payloads are skipped).
    fn pop_oldest(&mut self) -> Option<Payload> {
        while let Some((k, gen)) = self.order.pop_front() {
            if let Some(i) = self.slot_of_gen(&k, gen) {
                return self.remove_slot(&k, i);
            }
        }
        None
    }

    /// The oldest live entry's key and time.
    fn oldest(&mut self) -> Option<(PktKey, u64)> {
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
    fn reserve(&mut self, n: usize) {
        self.map.reserve(n);
        self.slots.reserve(n);
        self.bufs.reserve(n);
        self.order.reserve(n);
        self.recent.rings.reserve(PREFAULT_SESSIONS * RECENT_SLOTS);
        self.recent.at.reserve(PREFAULT_SESSIONS);
    }
}

#[derive(Debug, Clone)]
struct Rec {
    key: PktKey,
    /// The record's lane and first LaneSeq (where replay queues it, for [`DataOut::resolved`]).
    first_lane_seq: u64,
    lane: u8,
    count: u8,
    advance: bool,
    pkt_hash: Option<u64>,
    state: RecState,
    /// The full hash of the joined payload (tentative while unhashed).
    full: Option<Hash>,
    /// Fetch sources asked: 0 none, 1 home, 2 peer, 3.. the sequencer.
    stage: u8,
    /// An ask of this record is in flight (counted in [`FETCH_IN_FLIGHT_MAX`]'s window).
    asking: bool,
    /// The HashList entry this record's full hash must equal (07 §5.6 row 2).
    expect: Option<Box<Hash>>,
    /// The previous live record of the same key in this substream.
    prev: Option<u64>,
    /// When its armed timer is due (older timer entries are stale).
    due: u64,
}

#[derive(Debug, Default)]
struct Sub {
    /// Record id of `recs[0]`.
    base: u64,
    recs: VecDeque<Rec>,
    /// (height, end record id) per BlockMark, oldest first.
    marks: VecDeque<(u64, u64)>,
    last_height: Option<u64>,
}

impl Sub {
    fn get(&self, rid: u64) -> Option<&Rec> {
        self.recs
            .get(usize::try_from(rid.checked_sub(self.base)?).ok()?)
    }
    fn get_mut(&mut self, rid: u64) -> Option<&mut Rec> {
        self.recs
            .get_mut(usize::try_from(rid.checked_sub(self.base)?).ok()?)
    }
    fn end(&self) -> u64 {
        self.base + self.recs.len() as u64
    }
    /// Record ids of block `height`: `[start, end)`.
    fn range(&self, height: u64) -> Option<(u64, u64)> {
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

#[derive(Debug, Default)]
struct BoxRx {
    /// Newest DATA `data_seq` (or the one a heartbeat named).
    hi: Option<u64>,
    /// Missing `data_seq` ranges, both ends included.
    gaps: VecDeque<(u64, u64)>,
    last_rx: Option<u64>,
    down: bool,
    /// A frame of this box was seen since this replica started.
    seen: bool,
}

impl BoxRx {
    /// Take `s` out of a gap; true if it was missing.
    fn fill(&mut self, s: u64) -> bool {
        let Some(i) = self.gaps.iter().position(|&(a, b)| a <= s && s <= b) else {
            return false;
        };
        let (a, b) = self.gaps[i];
        match (a == s, b == s) {
            (true, true) => {
                self.gaps.remove(i);
            }
            (true, false) => self.gaps[i].0 = s + 1,
            (false, true) => self.gaps[i].1 = s - 1,
            (false, false) => {
                self.gaps[i].1 = s - 1;
                self.gaps.insert(i + 1, (s + 1, b));
            }
        }
        true
    }
}

#[derive(Debug, Default)]
struct ListAsm {
    header_root: Hash,
    /// Per substream: the parts, each `None` until it came.
    parts: [Vec<Option<Vec<Hash>>>; 2],
    compared: bool,
    bad: bool,
}

/// The replica's data side (see the module docs).
#[derive(Debug)]
pub struct DataSide {
    cfg: DataConfig,
    boxes: Vec<BoxRx>,
    store: Store,
    subs: [Sub; 2],
    index: RecIndex,
    homes: HashMap<u32, u8>,
    /// Per session: the highest `pkt_seq` whose payload was stored (07 §5.7 `resend_from`).
    hi_seq: HashMap<u32, u32, Seeded>,
    /// Records' first timers `(due, stream, rid)`, in due order: a record's due is its frame's
    /// time plus REP_DATA_WAIT_US, so they come in order and a queue takes them in O(1).
    arms: VecDeque<(u64, u8, u64)>,
    /// Re-armed timers (and a first one out of order).
    timers: BinaryHeap<Reverse<(u64, u8, u64)>>,
    /// Blocks whose `data_root` matched their header's, with that root: a vote's check asks
    /// again on every poll while a proposal is pending, and a root is a BLAKE3 over every
    /// record of the block.
    root_ok: BTreeMap<u64, Hash>,
    lists: BTreeMap<u64, ListAsm>,
    next_peer: usize,
    live_records: usize,
    c: DataCounters,
    /// Key fetches left in this pacing step, and when the step began.
    fetch_budget: (u64, u64),
    /// Asks in flight ([`FETCH_IN_FLIGHT_MAX`]).
    in_flight: u64,
}

/// Packets a data side prefaults for ([`DataSide::prefault`]): a second of a dev home's load,
/// 4.7 MB of slots.
const PREFAULT_PKTS: usize = 1 << 16;
/// Sessions whose [`Recent`] tables a data side reserves room for at start.
const PREFAULT_SESSIONS: usize = 1024;

/// Fault in a queue's pages for `n` entries without keeping any.
fn touch<T: Clone>(q: &mut VecDeque<T>, n: usize, v: T) {
    if q.is_empty() {
        q.resize(n, v);
        q.clear();
    }
}

/// The count a packet answered at packet level is logged with (a duplicate, a resend, a
/// conflicting duplicate, `BAD_SEQ`): one LaneSeq for its one answer, whatever its messages
/// (`docs/wire.md` "What the box logs"; `vyrn_engine::lane`).
pub const PKT_LEVEL_COUNT: u8 = 1;

/// The join of one record with one payload (07 §5.4): key (the caller's lookup), 8-byte hash,
/// and the count — the payload's message count, or [`PKT_LEVEL_COUNT`] for a packet the box
/// answered at packet level. Replay checks which of the two it was (the lane recomputes the
/// verdict and refuses a record whose numbering differs, `LaneReplayError::Numbering`).
fn judge(r: &Rec, count: u8, full: &Hash) -> RecState {
    if count != r.count && r.count != PKT_LEVEL_COUNT {
        return RecState::Mismatch;
    }
    match r.pkt_hash {
        None => RecState::Unhashed,
        Some(h) if pkt_hash_of(full) != h => RecState::Mismatch,
        Some(_) if r.expect.as_deref().is_some_and(|e| e != full) => RecState::Mismatch,
        Some(_) => RecState::Resolved,
    }
}

impl DataSide {
    /// Replace the timing (budgets of 07 §15; a dev home's data box heartbeats less often).
    pub fn set_timing(&mut self, t: DataTiming) {
        self.cfg.timing = t;
    }

    /// A data side for `cfg` (`n_boxes` is clamped to [`BOXES_MAX`], `n_streams` to 1..=2).
    pub fn new(mut cfg: DataConfig) -> Self {
        cfg.n_boxes = cfg.n_boxes.min(BOXES_MAX as u8);
        cfg.n_streams = cfg.n_streams.clamp(1, 2);
        DataSide {
            boxes: (0..cfg.n_boxes).map(|_| BoxRx::default()).collect(),
            cfg,
            store: Store::default(),
            subs: Default::default(),
            index: RecIndex::default(),
            homes: HashMap::new(),
            hi_seq: HashMap::default(),
            arms: VecDeque::new(),
            timers: BinaryHeap::new(),
            lists: BTreeMap::new(),
            root_ok: BTreeMap::new(),
            next_peer: 0,
            live_records: 0,
            c: DataCounters::default(),
            fetch_budget: (FETCH_KEYS_PER_STEP, 0),
            in_flight: 0,
        }
    }

    /// Touch the working set before the first packet (startup work, as the engines do): the
    /// store's slots and index, the record queues and the timers, sized for `REP_PREFAULT_PKTS`
    /// packets or the store's bound if smaller, so the first seconds take no page faults and no
    /// growth copies on the hot path.
    pub fn prefault(&mut self) {
        let n = self.cfg.store_max_pkts.min(PREFAULT_PKTS);
        let st = &mut self.store;
        st.reserve(n);
        if st.slots.is_empty() {
            st.slots.resize_with(n, || None);
            st.bufs.resize(n, [0; REQ_MAX_LEN]);
            // Slots are handed out from the front, in arrival order.
            st.free.extend((0..n as u32).rev());
        }
        touch(&mut st.order, n, (PktKey::default(), 0));
        touch(&mut self.arms, n, (0, 0, 0));
        self.index.reserve(n);
        self.hi_seq.reserve(PREFAULT_SESSIONS);
        let blank = Rec {
            key: PktKey::default(),
            first_lane_seq: 0,
            lane: 0,
            count: 0,
            advance: true,
            pkt_hash: None,
            state: RecState::Advance,
            full: None,
            stage: 0,
            asking: false,
            expect: None,
            prev: None,
            due: 0,
        };
        for sub in &mut self.subs {
            // Touched, not only reserved: the first pass through the queue takes no page
            // faults (they were ~8 % of core 3's time in `--bench replica`).
            touch(&mut sub.recs, n, blank.clone());
        }
    }

    /// The counters.
    pub fn counters(&self) -> &DataCounters {
        &self.c
    }

    /// Session `session`'s data home is box `d` (07 §5.1; assigned at session open).
    pub fn set_home(&mut self, session: u32, d: u8) {
        self.homes.insert(session, d);
    }

    /// Whether data box `d` is marked down (07 §5.7).
    pub fn box_down(&self, d: u8) -> bool {
        self.boxes.get(d as usize).is_some_and(|b| b.down)
    }

    /// Whether a frame of data box `d` was seen since this replica started.
    pub fn box_seen(&self, d: u8) -> bool {
        self.boxes.get(d as usize).is_some_and(|b| b.seen)
    }

    /// The missing `data_seq` ranges of box `d`, oldest first.
    pub fn gaps(&self, d: u8) -> Vec<(u64, u64)> {
        self.boxes
            .get(d as usize)
            .map(|b| b.gaps.iter().copied().collect())
            .unwrap_or_default()
    }

    /// The stored payload of `key`, as received (its first copy).
    pub fn payload(&self, key: PktKey) -> Option<&[u8]> {
        self.store.get(&key).map(|p| p.bytes)
    }

    /// The stored copy of `key` whose 8-byte hash is `pkt_hash` (its first copy for 0, an
    /// asker that has no HashRun yet).
    pub fn payload_for(&self, key: PktKey, pkt_hash: u64) -> Option<&[u8]> {
        let h = (pkt_hash != 0).then_some(pkt_hash);
        self.store.get_for(&key, h).map(|p| p.bytes)
    }

    /// The stored payload of `key` with the full hash this replica computed when it stored it.
    pub fn payload_hashed(&self, key: PktKey) -> Option<(&[u8], &Hash)> {
        self.store.get(&key).map(|p| (p.bytes, &p.m.full))
    }

    /// The stored copy of `key` whose 8-byte hash is `pkt_hash` (07 §5.4), with the full hash
    /// this replica computed when it stored it.
    pub fn payload_with_hash(&self, key: PktKey, pkt_hash: u64) -> Option<(&[u8], &Hash)> {
        self.store
            .get_hashed(&key, pkt_hash)
            .map(|p| (p.bytes, &p.m.full))
    }

    /// Payloads and payload bytes held.
    pub fn store_len(&self) -> (usize, usize) {
        (self.store.len(), self.store.bytes)
    }

    // -- data frames (07 §5.3) ----------------------------------------------------------------

    /// One data-frame datagram from data box `src_box` (the transport knows the sender). Returns
    /// the packets stored.
    pub fn on_data_frame(
        &mut self,
        src_box: u8,
        bytes: &[u8],
        now: u64,
        out: &mut impl DataOut,
    ) -> Result<usize, DataRefused> {
        let r = self.data_frame(src_box, bytes, now, out);
        if let Err(e) = r {
            self.c.refused[e.index()] += 1;
        }
        r
    }

    fn data_frame(
        &mut self,
        src_box: u8,
        bytes: &[u8],
        now: u64,
        out: &mut impl DataOut,
    ) -> Result<usize, DataRefused> {
        let f = DataFrame::parse(bytes).map_err(DataRefused::Malformed)?;
        let h = f.header;
        if h.src != src_box || src_box as usize >= self.boxes.len() {
            return Err(DataRefused::BadSource);
        }
        if h.book != self.cfg.book {
            return Err(DataRefused::OtherBook);
        }
        if h.epoch16 != self.cfg.epoch16 {
            return Err(DataRefused::OtherEpoch);
        }
        let b = &mut self.boxes[src_box as usize];
        // 07 §5.3: a box seen again after down (a restart) starts a new data_seq baseline.
        let base = if b.down { None } else { b.hi };
        if let (Some(hi), DataKind::Data | DataKind::DataHb) = (base, h.kind) {
            if h.data_seq > hi && h.data_seq - hi > DATA_AHEAD_MAX {
                return Err(DataRefused::TooFarAhead);
            }
        }
        if b.down {
            b.down = false;
            b.hi = None;
            b.gaps.clear();
            self.c.box_up += 1;
            out.alarm(DataAlarm::BoxUp { d: src_box });
        }
        b.last_rx = Some(now);
        match h.kind {
            DataKind::Data | DataKind::DataHb => {
                let s = h.data_seq;
                let hb = h.kind == DataKind::DataHb;
                self.c.frames[if hb { 1 } else { 0 }] += 1;
                match b.hi {
                    None if !b.seen => {
                        // This replica started after the box (a restart, a late join): the
                        // frames before the first one it sees are a gap like any other, fetched
                        // by range (the newest GAP_FRAMES_MAX of them) — a bulk catch-up, not a
                        // fetch per record.
                        b.seen = true;
                        b.hi = Some(s);
                        let to = if hb { s } else { s.saturating_sub(1) };
                        if to >= 1 {
                            self.c.history_gaps += 1;
                            self.open_gap(src_box, 1, to, out);
                        }
                    }
                    None => b.hi = Some(s),
                    Some(hi) if s > hi => {
                        // A heartbeat names the last DATA frame: everything up to it is due.
                        let to = if hb { s } else { s - 1 };
                        if to > hi {
                            self.open_gap(src_box, hi + 1, to, out);
                        }
                        self.boxes[src_box as usize].hi = Some(s);
                    }
                    Some(_) if hb => {}
                    Some(_) => {
                        if b.fill(s) {
                            self.c.gap_filled += 1;
                        } else {
                            self.c.frames_stale += 1;
                        }
                    }
                }
            }
            DataKind::FetchResp => {
                self.c.frames[2] += 1;
                // data_seq 0: a key answer or evidence; else the frame of a range answer.
                if h.data_seq != 0 && b.fill(h.data_seq) {
                    self.c.gap_filled += 1;
                }
            }
        }
        let mut stored = 0;
        for pkt in f.packets() {
            if self.ingest(Source::Box(src_box), pkt, now, out).is_ok() {
                stored += 1;
            }
        }
        Ok(stored)
    }

    fn open_gap(&mut self, d: u8, from: u64, to: u64, out: &mut impl DataOut) {
        if from > to {
            return;
        }
        self.c.gaps += 1;
        let mut from = from;
        if to - from >= GAP_FRAMES_MAX {
            from = to - GAP_FRAMES_MAX + 1;
            self.c.gap_clamped += 1;
        }
        let b = &mut self.boxes[d as usize];
        if b.gaps.len() >= GAPS_MAX {
            b.gaps.pop_front();
            self.c.gaps_dropped += 1;
        }
        b.gaps.push_back((from, to));
        // At most GAP_FRAMES_MAX / FETCH_RANGE_FRAMES requests, whatever the sender's numbers
        // (a `data_seq` near u64::MAX must not wrap the walk: issue F1 of the security review).
        let mut a = from;
        loop {
            let z = to.min(a.saturating_add(FETCH_RANGE_FRAMES - 1));
            self.c.gap_fetches += 1;
            out.data_fetch(d, &DataFetch::Range { from: a, to: z });
            if z >= to {
                break;
            }
            a = z + 1;
        }
    }

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
    fn ingest(
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

    fn ingest_inner(
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
            let unasked = matches!(src, Source::Box(_))
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

    /// The records of a key, newest first, from its index entry.
    fn chain(&self, head: Option<(u8, u64)>) -> impl Iterator<Item = &Rec> + '_ {
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
    fn waits_for(r: &Rec, src: Source) -> bool {
        match r.state {
            RecState::Missing | RecState::Unavailable => true,
            RecState::Mismatch => src == Source::Seq,
            _ => false,
        }
    }

    /// Whether any record of the key waits for a fetched copy from `src`.
    fn wants_any(&self, head: Option<(u8, u64)>, src: Source) -> bool {
        self.chain(head).any(|r| Self::waits_for(r, src))
    }

    /// Whether a record of the key that waits for a copy from `src` takes this one (its count and
    /// hash judged; `hashed`: only by a record whose HashRun is in and matches).
    fn wants(
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
    fn settle(
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

    fn insert(&mut self, key: PktKey, p: Payload<&[u8]>) {
        self.insert_copy(key, p, false);
    }

    /// Store `p` as `key`'s first copy, or (`extra`) as another distinct copy beside it.
    fn insert_copy(&mut self, key: PktKey, mut p: Payload<&[u8]>, extra: bool) {
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

    /// The session's data home as this replica knows it (07 §5.1, §5.7).
    pub fn home(&self, session: u32) -> Option<u8> {
        self.homes.get(&session).copied()
    }

    /// 07 §5.7 `resend_from` for `session` as this replica sees it: the lowest `pkt_seq` of a
    /// live record it has not resolved, else one past the highest payload it stored (a packet
    /// sent to a failed box after that never reached it). Each replica sends its own; the data
    /// boxes relay a lower one again and the client resends the difference.
    pub fn resend_from(&self, session: u32) -> u32 {
        self.resend_points(&[session])[0].1
    }

    /// [`Self::resend_from`] of each of `sessions`, in their order, from one pass over the live
    /// records (a failover's round, not per packet).
    pub fn resend_points(&self, sessions: &[u32]) -> Vec<(u32, u32)> {
        let mut out: Vec<(u32, u32)> = sessions
            .iter()
            .map(|&s| (s, self.hi_seq.get(&s).map_or(1, |h| h.saturating_add(1))))
            .collect();
        let at: HashMap<u32, usize> = sessions.iter().enumerate().map(|(i, &s)| (s, i)).collect();
        for r in self.subs.iter().flat_map(|sub| sub.recs.iter()) {
            if !matches!(
                r.state,
                RecState::Missing | RecState::Mismatch | RecState::Unavailable
            ) {
                continue;
            }
            if let Some(&i) = at.get(&r.key.session) {
                out[i].1 = out[i].1.min(r.key.pkt_seq);
            }
        }
        out
    }

    /// Join every live record of `key` with the stored payload. Returns the newest's state.
    fn join_key(&mut self, key: PktKey, now: u64, out: &mut impl DataOut) -> RecState {
        self.join_from(self.index.get(&key), now, out)
    }

    /// [`Self::join_key`] from the key's newest record as the index gave it.
    fn join_from(&mut self, head: Option<(u8, u64)>, now: u64, out: &mut impl DataOut) -> RecState {
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
    fn join_one(&mut self, s: u8, rid: u64, now: u64, out: &mut impl DataOut) -> RecState {
        let Some(r) = self.subs[s as usize].get_mut(rid) else {
            return RecState::Missing;
        };
        if matches!(r.state, RecState::Advance | RecState::Resolved) {
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
            }
        }
        st
    }

    // -- records from the decoder (07 §5.4) ---------------------------------------------------

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

    fn record(
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

    fn hash(
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

    // -- fetch order (07 §5.5) ----------------------------------------------------------------

    /// Ask the next source for record `(s, rid)` and re-arm its timer.
    fn fire(&mut self, s: u8, rid: u64, now: u64, out: &mut impl DataOut) {
        let n_peers = self.cfg.n_peers;
        let Some(r) = self.subs[s as usize].get_mut(rid) else {
            return;
        };
        let key = r.key;
        // The previous ask (if any) expired: its place in the window is free.
        if r.asking {
            r.asking = false;
            self.in_flight = self.in_flight.saturating_sub(1);
        }
        let step = self.cfg.timing.fetch_step_ns.max(1);
        if now.saturating_sub(self.fetch_budget.1) >= step {
            self.fetch_budget = (FETCH_KEYS_PER_STEP, now);
        }
        let mut retry_at = None;
        if self.in_flight >= FETCH_IN_FLIGHT_MAX {
            // The window is full: asked at the next step, stage kept.
            self.c.fetch_paced += 1;
            let due = now.saturating_add(step);
            r.due = due;
            self.timers.push(Reverse((due, s, rid)));
            return;
        }
        loop {
            match r.stage {
                0 => {
                    let home = self.homes.get(&key.session).copied();
                    if let Some(d) = home.filter(|&d| {
                        self.boxes
                            .get(d as usize)
                            .is_some_and(|b| !b.down && b.last_rx.is_some())
                    }) {
                        if self.fetch_budget.0 == 0 {
                            // Over the pace: asked at the next step, stage kept.
                            self.c.fetch_paced += 1;
                            break;
                        }
                        self.fetch_budget.0 -= 1;
                        r.stage = 1;
                        r.asking = true;
                        self.c.fetch_home += 1;
                        out.data_fetch(d, &DataFetch::Key(key));
                        break;
                    }
                    r.stage = 1;
                }
                1 => {
                    r.stage = 2;
                    if n_peers > 0 {
                        let peer = self.next_peer % n_peers;
                        self.next_peer = self.next_peer.wrapping_add(1);
                        self.c.fetch_peer += 1;
                        r.asking = true;
                        out.peer_data_fetch(peer, key, r.pkt_hash.unwrap_or(0));
                        break;
                    }
                }
                st if st < 2 + SEQ_TRIES => {
                    r.stage = st + 1;
                    self.c.fetch_seq += 1;
                    r.asking = true;
                    out.seq_data_req(key, r.pkt_hash.unwrap_or(0));
                    break;
                }
                _ => {
                    if r.state != RecState::Unavailable {
                        if r.state == RecState::Missing {
                            r.state = RecState::Unavailable;
                        }
                        self.c.unavailable += 1;
                        out.alarm(DataAlarm::Unavailable { key });
                    } else {
                        self.c.unavailable_retries += 1;
                    }
                    // Every source asked: the home again after a while (the block waits).
                    r.stage = 0;
                    retry_at = Some(now.saturating_add(UNAVAILABLE_RETRY_NS));
                    break;
                }
            }
        }
        if r.asking {
            self.in_flight += 1;
        }
        // A source gets longer before the next is asked while many asks are out: a replica far
        // behind answers late, and asking the next source every step only doubled the load
        // that made it late (a storm of 136k SeqDataReqs in 5 s, measured).
        let step = self.cfg.timing.fetch_step_ns;
        let wait = if r.asking {
            step.saturating_mul(1 + self.in_flight / FETCH_STEP_STRETCH)
        } else {
            step // paced: asked at the next step
        };
        let due = retry_at.unwrap_or(now.saturating_add(wait));
        r.due = due;
        self.timers.push(Reverse((due, s, rid)));
    }

    /// Record `r` no longer waits for an answer: its place in the fetch window is free.
    fn answered(in_flight: &mut u64, r: &mut Rec) {
        if r.asking {
            r.asking = false;
            *in_flight = in_flight.saturating_sub(1);
        }
    }

    /// Timers: box silence (07 §5.7), fetch escalation (§5.5), store age (§5.4).
    pub fn tick(&mut self, now: u64, out: &mut impl DataOut) {
        for (d, b) in self.boxes.iter_mut().enumerate() {
            let last = *b.last_rx.get_or_insert(now);
            if !b.down && now.saturating_sub(last) >= self.cfg.timing.silence_ns {
                b.down = true;
                self.c.box_down += 1;
                out.alarm(DataAlarm::BoxDown {
                    d: d as u8,
                    last_rx_ns: last,
                });
            }
        }
        loop {
            // The earlier of the two timer queues' heads.
            let (from_arms, (due, s, rid)) = match (self.arms.front(), self.timers.peek()) {
                (Some(&a), Some(&Reverse(h))) if a <= h => (true, a),
                (_, Some(&Reverse(h))) => (false, h),
                (Some(&a), None) => (true, a),
                (None, None) => break,
            };
            if due > now {
                break;
            }
            if from_arms {
                self.arms.pop_front();
            } else {
                self.timers.pop();
            }
            let Some(r) = self.subs[s as usize].get(rid) else {
                continue;
            };
            if r.due != due {
                continue;
            }
            match r.state {
                RecState::Missing | RecState::Mismatch | RecState::Unavailable => {
                    self.fire(s, rid, now, out)
                }
                _ => {}
            }
        }
        while let Some((k, t)) = self.store.oldest() {
            if now.saturating_sub(t) < self.cfg.timing.store_age_ns {
                break;
            }
            if self.index.contains_key(&k) {
                // A live record still needs it (verify, replay): kept until its block is
                // released — a replica catching up replays payloads older than the ring.
                self.store.order.pop_front();
                self.store.pinned.insert(k);
                self.c.age_pinned += 1;
                continue;
            }
            self.store.pop_oldest();
            self.c.evicted_age += 1;
        }
    }

    // -- blocks and data_root (07 §6.1, §6.4) -------------------------------------------------

    /// Record ranges of block `height` on every substream, or `None` until all are marked.
    fn ranges(&self, height: u64) -> Option<[(u64, u64); 2]> {
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
                    Some(RecState::Advance | RecState::Resolved) => {}
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
                    Some(r) if r.advance => {}
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
                if let Some(r) = self.subs[s].get(rid).filter(|r| !r.advance) {
                    let p = r.full.and_then(|full| self.store.get_full(&r.key, &full));
                    if let (Some(h), Some(p)) = (r.pkt_hash, p) {
                        f(h, p.bytes);
                    }
                }
            }
        }
        true
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
                if !r.advance {
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

    /// The vote check of block `height`'s payloads against its header's `data_root` (07 §6.4
    /// item 3). On a differing root it asks the order hasher for the block's HashList once
    /// (07 §5.6 row 2), compares it entry by entry as it comes ([`Self::on_hash_list`]) and
    /// fetches the sequencer's copy of every differing packet; it answers `Pending` until then.
    pub fn check_data_root(
        &mut self,
        height: u64,
        header_root: &Hash,
        out: &mut impl DataOut,
    ) -> RootCheck {
        if self.root_ok.get(&height) == Some(header_root) {
            return RootCheck::Match;
        }
        if let Some(l) = self.lists.get(&height) {
            if l.bad || l.header_root != *header_root {
                return RootCheck::Contradiction;
            }
        }
        let Some(root) = self.data_root(height) else {
            return RootCheck::Pending;
        };
        if root.data_root == *header_root {
            self.root_ok.insert(height, root.data_root);
            return RootCheck::Match;
        }
        match self.lists.get(&height) {
            // Every entry agreed with the list, and the list with the header: yet the root
            // differs. Nothing to fetch: a contradiction.
            Some(l) if l.compared => RootCheck::Contradiction,
            Some(_) => RootCheck::Pending,
            None => {
                self.lists.insert(
                    height,
                    ListAsm {
                        header_root: *header_root,
                        ..ListAsm::default()
                    },
                );
                self.c.hash_list_reqs += 1;
                out.hash_list_req(&HashListReq { height });
                RootCheck::Pending
            }
        }
    }

    /// One `HashList` part (07 §5.6 row 2), for a height [`Self::check_data_root`] asked for.
    /// When every part of every substream is in, the list is checked against the header and
    /// compared entry by entry; each differing record waits for the sequencer's copy.
    pub fn on_hash_list(
        &mut self,
        l: &HashList,
        now: u64,
        out: &mut impl DataOut,
    ) -> Result<(), PktRefused> {
        let r = self.hash_list(l, now, out);
        match r {
            Ok(()) => self.c.hash_list_parts += 1,
            Err(_) => self.c.hash_list_refused += 1,
        }
        r
    }

    fn hash_list(
        &mut self,
        l: &HashList,
        now: u64,
        out: &mut impl DataOut,
    ) -> Result<(), PktRefused> {
        let s = l.stream as usize;
        if s >= self.cfg.n_streams as usize {
            return Err(PktRefused::Unsolicited);
        }
        let Some((a, z)) = self.subs[s].range(l.height) else {
            return Err(PktRefused::Unsolicited);
        };
        let n = (a..z)
            .filter(|&rid| self.subs[s].get(rid).is_some_and(|r| !r.advance))
            .count();
        let Some(asm) = self.lists.get_mut(&l.height) else {
            return Err(PktRefused::Unsolicited);
        };
        if asm.compared || asm.bad {
            return Err(PktRefused::Duplicate);
        }
        // The shape `HashList::split` gives a list of our length; any other is a contradiction.
        let parts = n.div_ceil(HASH_LIST_PART_MAX).max(1);
        let part = l.part as usize;
        let want = n
            .saturating_sub(part * HASH_LIST_PART_MAX)
            .min(HASH_LIST_PART_MAX);
        if l.parts as usize != parts
            || part >= parts
            || l.first as usize != part * HASH_LIST_PART_MAX
            || l.hashes.len() != want
        {
            asm.bad = true;
            self.c.hash_list_bad += 1;
            out.alarm(DataAlarm::HashListBad { height: l.height });
            return Ok(());
        }
        if asm.parts[s].is_empty() {
            asm.parts[s] = vec![None; parts];
        }
        if asm.parts[s][part].is_some() {
            return Err(PktRefused::Duplicate);
        }
        asm.parts[s][part] = Some(l.hashes.clone());
        let ns = self.cfg.n_streams as usize;
        let complete = asm.parts[..ns]
            .iter()
            .all(|p| !p.is_empty() && p.iter().all(Option::is_some));
        if complete {
            self.compare_list(l.height, now, out);
        }
        Ok(())
    }

    fn compare_list(&mut self, height: u64, now: u64, out: &mut impl DataOut) {
        let ns = self.cfg.n_streams as usize;
        let Some(ranges) = self.ranges(height) else {
            return;
        };
        let Some(asm) = self.lists.get_mut(&height) else {
            return;
        };
        asm.compared = true;
        let lists: Vec<Vec<Hash>> = asm.parts[..ns]
            .iter()
            .map(|p| p.iter().flatten().flatten().copied().collect())
            .collect();
        let mut halves = [empty_root(); 2];
        for (s, list) in lists.iter().enumerate() {
            let mut d = DataRootHasher::default();
            list.iter().for_each(|h| d.push(h));
            halves[s] = d.finish();
        }
        if data_root(&halves[0], &halves[1]) != asm.header_root {
            asm.bad = true;
            self.c.hash_list_bad += 1;
            out.alarm(DataAlarm::HashListBad { height });
            return;
        }
        let mut differ = Vec::new();
        for (s, list) in lists.iter().enumerate() {
            let (a, z) = ranges[s];
            let mut i = 0;
            for rid in a..z {
                let Some(r) = self.subs[s].get_mut(rid) else {
                    continue;
                };
                if r.advance {
                    continue;
                }
                let Some(&e) = list.get(i) else { break };
                i += 1;
                r.expect = Some(Box::new(e));
                if r.full != Some(e) {
                    differ.push((s as u8, rid));
                }
            }
        }
        for (s, rid) in differ {
            self.c.root_mismatch_entries += 1;
            if let Some(r) = self.subs[s as usize].get_mut(rid) {
                r.state = RecState::Mismatch;
                r.stage = r.stage.max(2);
            }
            self.fire(s, rid, now, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pay(n: usize, t: u64) -> Payload {
        Payload {
            bytes: PktBuf::new(&vec![7; n]).expect("a packet's length"),
            full: [n as u8; 32],
            count: 1,
            origin: Source::Box(0),
            t,
            gen: 0,
        }
    }

    fn key(s: u32) -> PktKey {
        PktKey {
            session: 1,
            pkt_seq: s,
        }
    }

    /// The slab store: slots reused, a replaced key keeps one entry, bytes counted exactly,
    /// the oldest taken first (stale order entries skipped).
    #[test]
    fn the_store_reuses_slots_and_counts_bytes() {
        let mut st = Store::default();
        for s in 1..=3 {
            let mut p = pay(10 * s as usize, s as u64);
            p.gen = s as u64;
            st.order.push_back((key(s), s as u64));
            st.insert(key(s), p);
        }
        assert_eq!((st.len(), st.bytes), (3, 60));
        let gone = st.remove(&key(2)).expect("held");
        assert_eq!(gone.bytes.len(), 20);
        assert!(st.get(&key(2)).is_none());
        assert_eq!((st.len(), st.bytes), (2, 40));
        // The freed slot is taken again; the slab does not grow.
        st.insert(key(4), pay(5, 4));
        assert_eq!((st.slots.len(), st.len(), st.bytes), (3, 3, 45));
        // Replacing a key's payload keeps one entry.
        st.insert(key(4), pay(8, 4));
        assert_eq!((st.len(), st.bytes), (3, 48));
        assert_eq!(st.get(&key(4)).map(|p| p.bytes.len()), Some(8));
        // Oldest first; key 2's order entry is stale (removed) and skipped.
        assert_eq!(st.oldest().map(|(k, _)| k), Some(key(1)));
        assert_eq!(st.pop_oldest().map(|p| p.t), Some(1));
        assert_eq!(st.pop_oldest().map(|p| p.t), Some(3));
        assert!(
            st.pop_oldest().is_none(),
            "key 4 was never in the age order"
        );
        assert_eq!((st.len(), st.bytes), (1, 8));
    }

    #[derive(Default)]
    struct Fetches(Vec<DataFetch>);
    impl DataOut for Fetches {
        fn data_fetch(&mut self, _d: u8, f: &DataFetch) {
            self.0.push(*f);
        }
        fn peer_data_fetch(&mut self, _peer: usize, _key: PktKey, _h: u64) {}
        fn seq_data_req(&mut self, _key: PktKey, _h: u64) {}
        fn hash_list_req(&mut self, _r: &HashListReq) {}
        fn copy_mismatch(&mut self, _e: &CopyMismatch, _s: &[u8], _d: &[u8]) {}
        fn alarm(&mut self, _a: DataAlarm) {}
    }

    /// First timers go to the in-order queue; one armed out of order (an earlier frame time)
    /// goes to the heap and still fires first, at its time.
    #[test]
    fn a_record_timer_armed_out_of_order_fires_at_its_time() {
        let mut cfg = DataConfig::new(1, 3, 1, 0, 1);
        cfg.timing.wait_ns = 100;
        let mut d = DataSide::new(cfg);
        d.prefault();
        d.set_home(1, 0);
        let rec = |pkt_seq| PacketRecord {
            lane: 0,
            count: 1,
            session: 1,
            pkt_seq,
            ..PacketRecord::default()
        };
        let mut out = Fetches::default();
        d.on_record(0, &rec(1), 1_000, &mut out).expect("record");
        d.on_record(0, &rec(2), 500, &mut out).expect("record");
        assert_eq!((d.arms.len(), d.timers.len()), (1, 1));
        d.tick(700, &mut out);
        assert_eq!(out.0.len(), 1, "only the record due at 600 was fetched");
        d.tick(1_100, &mut out);
        assert_eq!(out.0.len(), 2, "then the one due at 1,100");
        assert!(d.arms.is_empty() && d.timers.len() <= 2);
    }

    /// A small deterministic generator for the model tests.
    struct Xs(u64);
    impl Xs {
        fn below(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % n
        }
    }

    /// The record index against a map: keys of a few sessions spread over several times
    /// RECENT_SLOTS `pkt_seq`s (entries taken, keys spilled, freed entries reused) and more
    /// sessions than RECENT_SESSIONS_MAX (the rest in the map alone): every get, replace and
    /// conditional remove answers as the map does.
    #[test]
    fn the_record_index_answers_as_a_map() {
        let mut ix = RecIndex::default();
        let mut model: HashMap<PktKey, (u8, u64)> = HashMap::new();
        let mut g = Xs(0x9e37_79b9_7f4a_7c15);
        // A few busy sessions, then a crowd past the table limit.
        let session = |g: &mut Xs| {
            if g.below(4) == 0 {
                10_000 + g.below(RECENT_SESSIONS_MAX as u64 + 64) as u32
            } else {
                g.below(4) as u32
            }
        };
        for i in 0..200_000u64 {
            let k = PktKey {
                session: session(&mut g),
                pkt_seq: g.below(RECENT_SLOTS as u64 * 3) as u32,
            };
            match g.below(3) {
                0 => {
                    let v = (g.below(2) as u8, i);
                    assert_eq!(ix.insert(k, v), model.insert(k, v), "insert {k:?}");
                }
                1 => {
                    // Remove with the right value most times, a wrong one sometimes.
                    let v = match model.get(&k) {
                        Some(&v) if g.below(4) > 0 => v,
                        _ => (0, i),
                    };
                    let want = model.get(&k) == Some(&v);
                    if want {
                        model.remove(&k);
                    }
                    assert_eq!(ix.remove_if(&k, v), want, "remove {k:?}");
                }
                _ => assert_eq!(ix.get(&k), model.get(&k).copied(), "get {k:?}"),
            }
        }
        for (k, v) in &model {
            assert_eq!(ix.get(k), Some(*v));
        }
        assert!(ix.at.len() <= RECENT_SESSIONS_MAX);
        assert!(!ix.spill.is_empty(), "the test reached the spill map");
    }

    /// The store against a map of which payload each key holds: the per-session table in
    /// front of the map never names a slot that was freed and handed to another key, nor a
    /// key whose entry another key took.
    #[test]
    fn the_stores_recent_table_never_names_another_keys_slot() {
        let mut st = Store::default();
        let mut model: HashMap<PktKey, usize> = HashMap::new();
        let mut g = Xs(0x2545_f491_4f6c_dd1d);
        for i in 0..100_000usize {
            let k = PktKey {
                session: g.below(3) as u32,
                pkt_seq: g.below(RECENT_SLOTS as u64 * 4) as u32,
            };
            match g.below(3) {
                0 => {
                    // Each payload's length names it.
                    st.insert(k, pay(i % REQ_MAX_LEN + 1, 0));
                    model.insert(k, i % REQ_MAX_LEN + 1);
                }
                1 => {
                    assert_eq!(
                        st.remove(&k).map(|p| p.bytes.len()),
                        model.remove(&k),
                        "remove {k:?}"
                    );
                }
                _ => assert_eq!(
                    st.get(&k).map(|p| p.bytes.len()),
                    model.get(&k).copied(),
                    "get {k:?}"
                ),
            }
        }
        assert_eq!(st.len(), model.len());
    }
}
