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

use vyrn_wire::consts::{
    REP_DATA_RING_S, REP_DATA_SILENCE_MS, REP_DATA_WAIT_US, REP_SEAL_DATA_WAIT_MS,
};
use vyrn_wire::error::Malformed;
use vyrn_wire::header::{data_root, empty_root, DataRootHasher, Hash};
use vyrn_wire::msg::client::{pkt_hash_of, ReqReject, Request, REQ_MAX_LEN};
use vyrn_wire::msg::ctrl::{DataFetch, HashList, HashListReq, HASH_LIST_PART_MAX};
use vyrn_wire::msg::data::{DataFrame, DataKind};
use vyrn_wire::msg::PktKey;
use vyrn_wire::records::PacketRecord;

mod boxes;
mod fetch;
mod join;
mod mismatch;
mod store;

use boxes::BoxRx;
use join::{Rec, Sub};
use mismatch::ListAsm;
use store::{Payload, RecIndex, Seeded, Store};

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

/// How long a data box may stay unheard after this replica starts before it is down (see
/// [`DataTiming::first_contact_ns`]).
pub const FIRST_CONTACT_NS: u64 = 1_000_000_000;

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
    /// A box this replica has not heard since it started is down only after this long (project
    /// choice: 07 §5.7 names no start-up rule, and the roles of a home start in any order; a
    /// box that never comes up still moves its sessions, [`FIRST_CONTACT_NS`] later).
    pub first_contact_ns: u64,
    /// REP_DATA_RING_S: payloads older than this leave the store.
    pub store_age_ns: u64,
    /// REP_SEAL_DATA_WAIT_MS: a seal leader lists a record of the tail unresolved this long
    /// after its ORDER frame as unavailable (07 §9.3 item 4).
    pub seal_wait_ns: u64,
}

impl Default for DataTiming {
    fn default() -> Self {
        DataTiming {
            wait_ns: REP_DATA_WAIT_US * 1000,
            fetch_step_ns: REP_DATA_WAIT_US * 1000,
            silence_ns: REP_DATA_SILENCE_MS * 1_000_000,
            first_contact_ns: FIRST_CONTACT_NS,
            store_age_ns: REP_DATA_RING_S * 1_000_000_000,
            seal_wait_ns: REP_SEAL_DATA_WAIT_MS * 1_000_000,
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
    /// This replica's own block journal: a block it checked before a restart (07 §8.2), read
    /// back so its payloads need not be fetched again. Stored unasked like a data box's push
    /// (its record may come later), never evidence about a client's copies.
    Journal,
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
    /// A final seal listed its packet unavailable (07 §9.4): replay runs it without a payload,
    /// its block's `data_root` takes 32 zero bytes for it, and a copy that still arrives is
    /// not taken.
    Excluded,
}

/// Why a voter refuses a seal's unavailable list (07 §9.3 item 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnavailRefused {
    /// This replica does not hold the tail after `BlockMark(H*)`.
    NoTail,
    /// A listed key names no record of the tail.
    NotInTail(PktKey),
    /// This replica can resolve a listed record: the leader fetches it (from this replica, a
    /// peer of its round robin) and the next proposal includes it.
    Held(PktKey),
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
    /// A final seal excluded the record of `lane` starting at `first_lane_seq` (07 §9.4):
    /// replay runs it without a payload. False when replay had already run it (its state then
    /// differs from the final log's).
    fn excluded(&mut self, _lane: u8, _first_lane_seq: u64) -> bool {
        true
    }
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
    /// Records of a sealed prefix, unhashed, resolved by key when their copy came after the
    /// seal (07 §9.3 item 4).
    pub resolved_after_seal: u64,
    /// Records a final seal listed unavailable (07 §9.4), run by replay without a payload.
    pub excluded: u64,
    /// Copies that came for a record a pending seal lists unavailable, held back until the
    /// seal was final.
    pub held_for_seal: u64,
    /// Of those, records this replica had resolved and handed to replay before the seal was
    /// final (its replay ran a packet the final log excludes: a divergence).
    pub excluded_late: u64,
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
    /// Per substream, the record ids below this are a sealed tenure's prefix (07 §9.4): one
    /// still unhashed is resolved by key alone when its copy comes.
    sealed_to: [u64; 2],
    /// Keys a seal this replica proposed or accepted lists unavailable (07 §9.3 item 4): a copy
    /// that arrives is stored but not joined until the seal is final, so replay never runs a
    /// packet the final log may exclude. Sorted.
    hold: Vec<PktKey>,
    /// Per substream, the first record id of a deposed tenure's tail ([`DataSide::hold_tail`]):
    /// records from here resolve only once the seal is final.
    hold_from: Option<[u64; 2]>,
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
            sealed_to: [0; 2],
            hold: Vec::new(),
            hold_from: None,
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
            at: 0,
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

    /// Whether `key`'s copies are held back from replay until a seal is final: a pending seal
    /// lists it ([`DataSide::hold_for_seal`]), or its record is of a deposed tenure's tail and
    /// unresolved ([`DataSide::hold_tail`]).
    pub fn held(&self, key: &PktKey) -> bool {
        if !self.hold.is_empty() && self.hold.binary_search(key).is_ok() {
            return true;
        }
        let Some(hf) = self.hold_from else {
            return false;
        };
        self.index.get(key).is_some_and(|(s, rid)| {
            rid >= hf[s as usize & 1]
                && self.subs[s as usize & 1]
                    .get(rid)
                    .is_some_and(|r| r.state != RecState::Resolved)
        })
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
}

/// The data side is where replay finds its payloads: the stored copy of the key whose 8-byte
/// hash is the record's (a key can hold several copies, `docs/wire.md` "What the box logs").
impl crate::replay::PayloadSource for DataSide {
    fn payload(&self, session: u32, pkt_seq: u32, pkt_hash: u64) -> Option<&[u8]> {
        // The hash the data side computed when it stored the copy: no second BLAKE3.
        let key = vyrn_wire::msg::PktKey { session, pkt_seq };
        if self.held(&key) {
            return None;
        }
        self.payload_with_hash(key, pkt_hash).map(|(p, _)| p)
    }

    /// The one distinct copy of the key (by the full hash this replica computed when it stored
    /// each): 07 §9.3's rule for a record the sealed prefix left unhashed.
    fn payload_by_key(&self, session: u32, pkt_seq: u32) -> vyrn_engine::KeyOnly<'_> {
        let key = vyrn_wire::msg::PktKey { session, pkt_seq };
        if self.held(&key) {
            return vyrn_engine::KeyOnly::NotHeld;
        }
        let mut copies = self.store.copies(&key).map(|(_, p)| p);
        let Some(first) = copies.next() else {
            return vyrn_engine::KeyOnly::NotHeld;
        };
        if copies.any(|p| p.m.full != first.m.full) {
            return vyrn_engine::KeyOnly::Ambiguous;
        }
        vyrn_engine::KeyOnly::Held(first.bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::store::{PktBuf, RECENT_SESSIONS_MAX, RECENT_SLOTS};
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
