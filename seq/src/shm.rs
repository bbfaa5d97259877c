//! The box's shared-memory entries (07 §4.1's table): what the tiles pass each other through
//! the rings — `R_pkt[l]`, `R_step` (steps and block marks), closed block halves — and the box's
//! configuration as the tiles take it.

use vyrn_engine::bbo::StepOut;
use vyrn_engine::EngineConfig;
use vyrn_wire::consts::N_LANES_MAX;
use vyrn_wire::frame::FrameKind;
use vyrn_wire::records::{PacketRecord, SessionBind, StepKind, PKT_ENC_MAX};

/// An `R_pkt[l]` entry (07 §4.1): the record pre-encoded by its lane.
#[derive(Debug, Clone, Copy)]
pub struct PktEntry {
    /// First LaneSeq.
    pub first_lane_seq: u64,
    /// LaneSeqs it takes.
    pub count: u8,
    /// Encoded length.
    pub len: u8,
    /// Encoded bytes.
    pub enc: [u8; PKT_ENC_MAX],
}

/// An `R_step` entry (07 §4.1): the StepRecord with `need_A`/`need_B`.
#[derive(Debug, Clone, Copy)]
pub struct StepEntry {
    /// StepId.
    pub step: u64,
    /// Kind.
    pub kind: StepKind,
    /// Source lane.
    pub src_lane: u8,
    /// Source LaneSeq.
    pub src_lane_seq: u64,
    /// Cut (`n_lanes` values used).
    pub cut: [u64; N_LANES_MAX],
    /// Payload bytes.
    pub payload: [u8; 16],
    /// Payload length.
    pub plen: u8,
    /// need_A.
    pub need_a: u64,
    /// need_B.
    pub need_b: u64,
    /// Both substreams carry a record.
    pub spans: bool,
}

/// The SessionBinds a tenure starts with: every configured session at `next_pkt_seq` 1 (07 §3.5).
pub(crate) fn session_binds(e: &EngineConfig) -> Vec<SessionBind> {
    e.sessions
        .iter()
        .map(|s| SessionBind {
            lane: s.lane,
            slot: s.slot,
            session: s.session,
            next_pkt_seq: 1,
        })
        .collect()
}

/// A block's full-hash lists as `HashList` messages, each part's bytes to `send` (07 §5.6).
pub fn hash_list_parts(height: u64, lists: &HashLists, mut send: impl FnMut(&[u8])) {
    for (h, list) in lists.iter().enumerate() {
        for part in vyrn_wire::msg::ctrl::HashList::split(height, h as u8, list) {
            if let Ok(b) = part.to_bytes() {
                send(&b);
            }
        }
    }
}

impl PktEntry {
    /// The entry for a record the lane logged, with its pre-encoded bytes.
    pub fn new(rec: &PacketRecord, enc: &[u8]) -> Self {
        let mut e = PktEntry {
            first_lane_seq: rec.first_lane_seq,
            count: rec.count,
            len: enc.len() as u8,
            enc: [0; PKT_ENC_MAX],
        };
        e.enc[..enc.len()].copy_from_slice(enc);
        e
    }
}

impl StepEntry {
    /// The entry for a step the BBO core ran.
    pub fn from_out(s: &StepOut<'_>) -> Self {
        let mut e = StepEntry {
            step: s.step,
            kind: s.kind,
            src_lane: s.src_lane,
            src_lane_seq: s.src_lane_seq,
            cut: [0; N_LANES_MAX],
            payload: [0; 16],
            plen: s.payload.len().min(16) as u8,
            need_a: s.need_a,
            need_b: s.need_b,
            spans: s.spans,
        };
        e.cut[..s.cut.len()].copy_from_slice(s.cut);
        e.payload[..e.plen as usize].copy_from_slice(&s.payload[..e.plen as usize]);
        e
    }
}

/// A packet's `pkt_hash` (07 §3.7): the first 8 bytes of its full BLAKE3, little-endian.
pub fn pkt_hash8(full: &[u8; 32]) -> u64 {
    let mut h = [0u8; 8];
    h.copy_from_slice(&full[..8]);
    u64::from_le_bytes(h)
}

/// An `R_step` entry: a step, or the block-mark entry the BBO core places after its current
/// step when stream-A asks for a block's close (07 §3.9, §6.1).
#[derive(Debug, Clone, Copy)]
#[allow(clippy::large_enum_variant)] // a ring slot is fixed-size; boxing would allocate per step
pub enum StepMsg {
    /// A step.
    Step(StepEntry),
    /// Close block `height` after step `last_step`.
    Mark {
        /// Height.
        height: u64,
        /// Last StepId of the block.
        last_step: u64,
    },
}

/// One substream's part of a closed block, for the order hasher (07 §4.6, §6.1).
#[derive(Debug, Clone)]
pub struct ClosedHalf {
    /// Height.
    pub height: u64,
    /// First StepId of the block.
    pub first_step: u64,
    /// Last StepId.
    pub last_step: u64,
    /// `order_root_H(h)`.
    pub order_root: [u8; 32],
    /// The block's PacketRecords on this substream in O-order: (lane, first_lane_seq).
    pub recs: Vec<(u8, u64)>,
}

/// What a written ORDER frame holds (for the invariant checks).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FrameInfo {
    /// Substream.
    pub stream: u8,
    /// frame_seq.
    pub frame_seq: u64,
    /// Kind (None until written).
    pub kind: Option<FrameKind>,
    /// Per lane: highest LaneSeq of a record in this frame (0: none).
    pub lane_max: Vec<u64>,
    /// Step half records in this frame, with this half's cut.
    pub steps: Vec<(u64, Vec<u64>)>,
}

/// Box configuration. Its `Debug` leaves the signing seed out (security review F18).
#[derive(Clone)]
pub struct SeqConfig {
    /// The engine (book, lanes, sessions, accounts, deadlines).
    pub engine: EngineConfig,
    /// Epoch.
    pub epoch: u32,
    /// Block period (07 §6.1: `BLOCK_NS`; `u64::MAX`: never close).
    pub block_ns: u64,
    /// The sequencer's Ed25519 signing key seed (`seq_key`, loaded once, never written).
    pub seq_key: [u8; 32],
    /// Voting replicas (n; quorum Q = n − ⌊(n − 1)/3⌋, 3 of 4 in BASE).
    pub voters: usize,
    /// Bytes of each stream core's frame ring for retransmission (REP_RTX_RING_BYTES).
    pub rtx_ring_bytes: usize,
    /// Whose frames these are (07 §2.2): the tenure and this box's sequencer index.
    pub tenure: TenureId,
}

/// A tenure and its sequencer (07 §2.2): every frame header, TenureStart, RepAck, NACK,
/// NackTooOld and REP_DurableMark of the tenure carries them, and a message of another tenure
/// is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TenureId {
    /// `tenure`: 0 at the start of each epoch, +1 at every failover.
    pub tenure: u8,
    /// The sequencer's index in `REP_Membership.seq_order` (the frame header's `sender`).
    pub sender: u8,
}

impl TenureId {
    /// The first tenure of an epoch, by its primary (`seq_order` index 0).
    pub const FIRST: TenureId = TenureId {
        tenure: 0,
        sender: 0,
    };
}

impl std::fmt::Debug for SeqConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SeqConfig")
            .field("engine", &self.engine)
            .field("epoch", &self.epoch)
            .field("block_ns", &self.block_ns)
            .field("seq_key", &"<secret>")
            .field("voters", &self.voters)
            .field("rtx_ring_bytes", &self.rtx_ring_bytes)
            .field("tenure", &self.tenure)
            .finish()
    }
}

/// A block's full-hash lists, one per substream.
pub type HashLists = [Vec<[u8; 32]>; 2];

#[cfg(test)]
mod secret_tests {
    /// Security review F18: the signing seed never reaches a log through `Debug`.
    #[test]
    fn debug_leaves_the_signing_seed_out() {
        let c = super::SeqConfig {
            engine: vyrn_engine::EngineConfig::test_home(2, 2),
            epoch: 1,
            block_ns: 1,
            seq_key: [0xAB; 32],
            voters: 4,
            rtx_ring_bytes: 1,
            tenure: crate::shm::TenureId::FIRST,
        };
        let s = format!("{c:?}");
        assert!(s.contains("<secret>") && s.contains("voters: 4"), "{s}");
        assert!(!s.contains("171, 171"), "{s}");
    }
}
