//! Constants of spec 07 ("Local definitions") and missing-chapters §1, each defined once.
//!
//! Values 07 calls a *budget* are defaults that config may override; the rest are fixed by the
//! wire format and never change without a new format version.

/// Frame header magic, "PB" (07 §3.2).
pub const FRAME_MAGIC: u16 = 0x4250;
/// Frame format version (07 §3.2).
pub const FRAME_VERSION: u8 = 1;
/// Frame header length (07 §3.2).
pub const REP_FRAME_HDR_BYTES: usize = 24;
/// ORDER body cap in bytes (07 §4.5; budget).
pub const REP_ORDER_FRAME_MAX: usize = 160;
/// HASH frames are at most this many bytes of body (07 §3.1: ≤ 9000 B frames).
pub const REP_HASH_FRAME_MAX: usize = 9000 - REP_FRAME_HDR_BYTES;
/// Packets per lane BLAKE3 batch (07 §3.7; budget).
pub const REP_HASH_BATCH: usize = 16;
/// HashRun lag behind its record, ns (07 §3.7, INV-REP-8; budget).
pub const REP_HASH_LAG_NS: u64 = 4000;
/// A replica raises `REP_E_HASHLAG` when a record waits this long for its hash (07 §3.7).
pub const REP_HASHLAG_FAULT_NS: u64 = 1_000_000;
/// Oldest record in an unflushed frame, ns (07 §4.5; budget).
pub const REP_FLUSH_MAX_NS: u64 = 1000;
/// Gate past the step budget, max ns (07 §4.7; budget).
pub const REP_FRAME_GATE_NS: u64 = 60;
/// Early push point, ns into the step (07 §4.7; budget).
pub const REP_KIND_FIX_NS: u64 = 10;
/// Stream core busy per flush, max ns (07 §4.7; budget).
pub const REP_FLUSH_BUSY_NS: u64 = 32;
/// LaneCut written after release, max ns (07 §4.11; budget).
pub const REP_ACK_GATE_NS: u64 = 10;
/// Busy fraction budget of each stream core (07 §4.7).
pub const REP_STREAM_MAX_LOAD: f64 = 0.50;
/// Longest signer slice, ns (07 §6.2; budget).
pub const REP_SIGN_SLICE_NS: u64 = 50;
/// Block close → HEADER out, max µs (07 §6.2; budget).
pub const REP_SEAL_US: u64 = 100;
/// Heartbeat period, µs (07 §4.8; budget).
pub const REP_HB_US: u64 = 50;
/// Replica ack period, µs (07 §4.8; budget).
pub const REP_ACK_US: u64 = 50;
/// Fresh-ack window of the self-fence, µs (07 §4.8; budget).
pub const REP_SELF_FENCE_US: u64 = 250;
/// A box acks only while it received a frame this recently, µs (07 §4.8; budget).
pub const REP_ACK_LIVE_US: u64 = 100;
/// Fresh voters needed to keep releasing, n − Q + 1 + f (07 §4.8).
pub const REP_FENCE_ACKS: usize = 3;
/// Metro one-way bound of a timely network, ms (07 §6.6).
pub const REP_HOP_MAX_MS: f64 = 0.8;
/// Finality gate: closed blocks allowed ahead of finality (07 §6.8, 01 §14.9).
pub const FIN_GATE_BLOCKS: u64 = 8;
/// Finality-gate resume threshold, blocks (07 §6.8; budget).
pub const REP_GATE_RESUME_BLOCKS: u64 = 4;
/// Halt longer than this reopens via auction, ms (07 §6.8; budget).
pub const REP_GATE_AUCTION_MS: u64 = 1000;
/// Longest wait for a late TailReport, ms (07 §9.2; budget).
pub const REP_TAIL_WAIT_MS: f64 = 4.05;
/// Hole wait before the first NACK, µs (07 §4.9; budget).
pub const REP_HOLE_WAIT_US: u64 = 5;
/// NACK retry period, µs (07 §4.9; budget).
pub const REP_NACK_RETRY_US: u64 = 50;
/// Retransmit buffer per stream core, bytes (07 §4.10; budget).
pub const REP_RTX_RING_BYTES: usize = 64 << 20;
/// Sequencer retransmit cap, frames/s (07 §4.10; budget).
pub const REP_RTX_MAX_FPS: u64 = 200_000;
/// Peer retransmit cap, frames/s (07 §4.10; budget).
pub const REP_PEER_RTX_MAX_FPS: u64 = 1_000_000;
/// Replica in-memory frame store, ms (07 §4.10; budget).
pub const REP_PEER_RING_MS: u64 = 2000;
/// Path loss alarm threshold (07 §4.9; budget).
pub const REP_PATH_LOSS_ALARM: f64 = 1e-6;
/// Path silence alarm, ms (07 §4.9; budget).
pub const REP_PATH_DOWN_MS: u64 = 100;
/// Sequencer retention of per-block full-hash lists, ms (07 §4.6; budget).
pub const REP_SEQ_HASHLIST_MS: u64 = 50;
/// Sequencer retention of lane packets, ms (07 §5.5; budget).
pub const REP_SEQ_PKT_RETAIN_MS: u64 = 50;
/// Sequencer data-repair cap, packets/s (07 §5.5; budget).
pub const REP_SEQ_DATA_MAX_PPS: u64 = 50_000;
/// Data box RAM ring, s (07 §5.1; budget).
pub const REP_DATA_RING_S: u64 = 10;
/// Data frame age flush, µs (07 §5.2; budget).
pub const REP_DATA_BATCH_US: u64 = 5;
/// Data box silence before it is marked down, ms (07 §5.3; budget).
pub const REP_DATA_SILENCE_MS: u64 = 1;
/// Unresolved record wait before a fetch, µs (07 §5.5; budget).
pub const REP_DATA_WAIT_US: u64 = 300;
/// Data frame size flush, bytes (07 §5.2).
pub const REP_DATA_FRAME_MAX: usize = 9000;
/// Client retention of sent packets, ms (07 §5.7; budget).
pub const REP_CLIENT_RETAIN_MS: u64 = 100;
/// Simplex Δ, ms (07 §6.3; budget).
pub const REP_DELTA_MS: u64 = 1;
/// Proposal range cap (07 §6.3; budget).
pub const REP_MAX_HDRS_PER_PROPOSAL: u64 = 16;
/// Seal range cap (07 §9.4; budget).
pub const REP_MAX_SEAL_RANGE: u64 = 64;
/// verify pending limit, ms (07 §6.4; budget).
pub const REP_VERIFY_WAIT_MS: u64 = 4;
/// Root interval, blocks (07 §7.4; budget).
pub const REP_ROOT_BLOCKS: u64 = 1000;
/// Root gate, blocks (07 §7.4; budget).
pub const REP_ROOT_GATE_BLOCKS: u64 = 5000;
/// An uncertified root counts as divergence after this, ms (07 §7.4; budget).
pub const REP_ROOT_TIMEOUT_MS: u64 = 2000;
/// Snapshot period per participant, s (07 §7.5; budget).
pub const REP_SNAP_INTERVAL_S: u64 = 60;
/// Replay history needed to be promotable, s (07 §7.5; budget).
pub const REP_PROMOTE_HISTORY_S: u64 = 10;
/// Replay lag a promotable standby reports at most, µs (07 §9.5: `replay_lag_us ≤ 2,000`).
pub const REP_PROMOTE_LAG_US: u64 = 2_000;
/// "Caught up" threshold, ms (07 §7.6; budget).
pub const REP_LIVE_LAG_MS: u64 = 10;
/// A suspicion without Q is abandoned after this, ms (07 §9.1; budget).
pub const REP_SUSPECT_ABORT_MS: u64 = 5;
/// Leader's wait before marking a packet unavailable, ms (07 §9.3; budget).
pub const REP_SEAL_DATA_WAIT_MS: u64 = 2;
/// Certification lead before a membership boundary, s (07 §13.1; budget).
pub const REP_MEMBERSHIP_LEAD_S: u64 = 3600;
/// Silence on both paths before a voter suspects the sequencer, ms (07 §9.1).
pub const FAILOVER_SILENCE_MS: u64 = 2;
/// Failover budget, ms (07 §9.7).
pub const FAILOVER_TARGET_MS: u64 = 20;
/// Finality bound for every accepted order, ms (07 §6.6).
pub const FINALITY_MAX_MS: u64 = 10;

/// UDP port of ORDER/HASH/HEADER/HEARTBEAT frames (07 §3.1).
pub const REP_UDP_ORDER: u16 = 7400;
/// UDP port of NACKs, acks, retransmits (07 §3.1).
pub const REP_UDP_CTRL: u16 = 7401;
/// UDP port of data frames (07 §3.1).
pub const REP_UDP_DATA: u16 = 7402;
/// UDP port of peer repair (07 §3.1).
pub const REP_UDP_REPAIR: u16 = 7403;

/// Upper bound on lanes: the LaneRun tag has 6 bits (07 §3.4).
pub const N_LANES_MAX: usize = 64;
/// Lanes of the REF profile (07 §3.4: lanes 0–48).
pub const N_LANES_REF: usize = 49;
/// Lanes of the CONSUMER profile (07 §3.4).
pub const N_LANES_CONSUMER: usize = 11;
/// Half size bound: `(N_LANES_MAX + 1) / 2` (07 §3.5).
pub const N_HALF_MAX: usize = N_LANES_MAX.div_ceil(2);
/// Sessions per lane (missing-chapters §1).
pub const MAX_SESSIONS_PER_LANE: usize = 4096;
/// Numbered messages per packet (missing-chapters §1).
pub const MAX_MSGS_PER_PKT: usize = 10;
/// Block period, ns: 1 kHz blocks (missing-chapters §1).
pub const BLOCK_NS: u64 = 1_000_000;
/// Slot value of an Advance record (07 §3.6).
pub const REP_SLOT_ADVANCE: usize = MAX_SESSIONS_PER_LANE;
/// Slot value of an AcctTake (07 §3.6).
pub const REP_SLOT_TAKE: usize = MAX_SESSIONS_PER_LANE + 1;
/// The REF pool: lanes 42–48 (07 §7.2).
pub const REF_POOL_LANES: core::ops::Range<usize> = 42..49;
/// Source lane value meaning "none" (07 §3.8).
pub const SRC_NONE: u8 = 0xFF;
/// BlockHeader length in bytes (07 §3.10).
pub const BLOCK_HEADER_BYTES: usize = 190;
/// Signed prefix of the BlockHeader (07 §3.10).
pub const BLOCK_HEADER_SIGNED_BYTES: usize = 126;

/// Domain strings (07 §2.2, §3.10, §6.3, §7.4, §13.1; wire-decisions 23: ASCII, no terminator).
pub mod domain {
    /// `header_hash` domain (07 §2.2).
    pub const HEADER: &[u8] = b"vyrn v1 header";
    /// `seq_sig` domain (07 §3.10).
    pub const BLOCK: &[u8] = b"vyrn v1 block";
    /// Proposal digest domain (07 §6.3).
    pub const PROPOSAL: &[u8] = b"vyrn v1 proposal";
    /// State-root vote domain (07 §7.4).
    pub const ROOT: &[u8] = b"vyrn v1 root";
    /// Membership certificate domain (07 §13.1).
    pub const MEMBERSHIP: &[u8] = b"vyrn v1 membership";
    /// `NackTooOld` signature domain (a project addition: 07 §4.10 leaves it unsigned, and a
    /// spoofed one stopped a replica from NACKing the box, security review F17).
    pub const NACK_TOO_OLD: &[u8] = b"vyrn v1 nack too old";
}

/// Bound on records awaiting their HashRun per lane (the `R_hash8` ring size, 07 §4.1). More than
/// this outstanding is `REP_E_HASHLAG`: the sequencer cannot have framed it legitimately.
pub const AWAIT_HASH_MAX: usize = 64 * 1024;

/// Most frames one NACK or `RepairReq` names (a project bound; 07 §4.9–§4.10 give none): a
/// replica repairs a hole window by window, this many at a time, so a request for more is not
/// a replica's and is refused whole (typed, counted), never walked (security review F5).
pub const NACK_SPAN_MAX: u64 = 256;

/// Response packets the recovery service keeps per session (07 §8.5): the last 65,536.
pub const RESP_RETAIN_PKTS: u64 = 65_536;
/// Most rebuilt resends the recovery service sends per second (07 §8.5).
pub const REP_RSP_MAX_PPS: u64 = 2_000_000;
/// The recovery service's store on R3's NVMe (07 §8.5: ≤ 200,704 sessions × 65,536 × 53 B ≈
/// 700 GB, so 1 TB).
pub const REP_RSP_STORE_BYTES: u64 = 1 << 40;
