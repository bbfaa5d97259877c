//! Control messages (07 §4.8–§4.10, §5.2–§5.7, §6.9, §9, §10.1, §13.1).
//!
//! Every message starts with a one-byte message type ([`ty`]) so that all of them can share the
//! `REP_UDP_CTRL` port; [`CtrlMsg::parse`] dispatches on it. Each struct's `encode` writes the
//! type byte and its body, and its `parse` takes exactly one whole message. `encode` refuses
//! (with the `Malformed` that `parse` would return) anything `parse` would reject, so every
//! encoded message parses back to itself. Layouts: `docs/wire-messages.md`.

use core::fmt;

use ed25519_dalek::{Signature, Signer, SigningKey, VerifyingKey};

use crate::consts::{domain, BLOCK_HEADER_BYTES};
use crate::error::Malformed;
use crate::header::{BlockHeader, Hash};
use crate::leb::Reader;
use crate::msg::consensus::{
    read_entries_bounded, write_entries, CertEntry, RepFinalityCert, RepProposal, RepSealExt,
};
use crate::msg::{finish, put_u16, put_u32, put_u64, Addr18, PktKey};
use crate::msg::{MAX_MEMBERS, N_BASE, N_CHAIN, Q_BASE, Q_CHAIN};

/// Control message type codes: byte 0 of every control message (project assignment).
pub mod ty {
    /// [`RepAck`](super::RepAck).
    pub const REP_ACK: u8 = 0x01;
    /// [`Nack`](super::Nack).
    pub const NACK: u8 = 0x02;
    /// [`NackTooOld`](super::NackTooOld).
    pub const NACK_TOO_OLD: u8 = 0x03;
    /// [`RepairReq`](super::RepairReq).
    pub const REPAIR_REQ: u8 = 0x04;
    /// [`DataFetch::Range`](super::DataFetch::Range).
    pub const DATA_FETCH_RANGE: u8 = 0x05;
    /// [`DataFetch::Key`](super::DataFetch::Key).
    pub const DATA_FETCH_KEY: u8 = 0x06;
    /// [`HashListReq`](super::HashListReq).
    pub const HASH_LIST_REQ: u8 = 0x07;
    /// [`TailReport`](super::TailReport) on its own (the standby's report, §9.3).
    pub const TAIL_REPORT: u8 = 0x08;
    /// [`Silence`](super::Silence).
    pub const SILENCE: u8 = 0x09;
    /// [`TailConflict`](super::TailConflict).
    pub const TAIL_CONFLICT: u8 = 0x0A;
    /// [`SeqEquivocation`](super::SeqEquivocation).
    pub const SEQ_EQUIVOCATION: u8 = 0x0B;
    /// [`RepDurableMark`](super::RepDurableMark).
    pub const REP_DURABLE_MARK: u8 = 0x0C;
    /// [`DataBadMac`](super::DataBadMac).
    pub const DATA_BAD_MAC: u8 = 0x0D;
    /// [`CopyConflict`](super::CopyConflict).
    pub const COPY_CONFLICT: u8 = 0x0E;
    /// [`DataDown`](super::DataDown).
    pub const DATA_DOWN: u8 = 0x0F;
    /// [`DataRedirect`](super::DataRedirect).
    pub const DATA_REDIRECT: u8 = 0x10;
    /// [`SeqChange`](super::SeqChange).
    pub const SEQ_CHANGE: u8 = 0x11;
    /// [`RepMembership`](super::RepMembership).
    pub const REP_MEMBERSHIP: u8 = 0x12;
    /// A `REP_FinalityCert` sent to the sequencer's and standby's control port (07 §6.8).
    pub const FINALITY_CERT: u8 = 0x13;
    /// `HashList`: one part of a block's full-hash list, the answer to `HashListReq` (a vyrn
    /// decision: 07 §4.6/§5.6 name the request, not the answer; docs/wire.md).
    pub const HASH_LIST: u8 = 0x14;
    /// [`FinalizeVote`](super::FinalizeVote): one voter's Simplex finalize vote to the
    /// sequencer's control port (07 §6.8; the message's bytes are a vyrn decision).
    pub const FINALIZE_VOTE: u8 = 0x15;
    /// [`Diverge`](super::Diverge): a voter's `REP_A_DIVERGE` evidence to the sequencer's
    /// control core (07 §7.4; the message's bytes are a vyrn decision).
    pub const DIVERGE: u8 = 0x16;
    /// [`PeerDataFetch`](super::PeerDataFetch): one packet asked of a peer replica (07 §5.5
    /// source 2).
    pub const PEER_DATA_FETCH: u8 = 0x17;
    /// [`PeerData`](super::PeerData): a peer's answer, the packet as it stored it (a vyrn
    /// decision: 07 names only the request).
    pub const PEER_DATA: u8 = 0x18;
    /// [`SeqDataReq`](super::SeqDataReq): one packet asked of the sequencer's control core
    /// (07 §5.5 source 3).
    pub const SEQ_DATA_REQ: u8 = 0x19;
    /// [`SeqData`](super::SeqData): the sequencer's answer, the bytes its lane matched (a vyrn
    /// decision: 07 names only the request).
    pub const SEQ_DATA: u8 = 0x1A;
    /// [`SealOffer`](super::SealOffer): the seal leader's kind-1 proposal with its
    /// `REP_SealExt`, to every voter (07 §9.4; how the ext reaches the voters is a vyrn
    /// decision: Simplex carries only the digest).
    pub const SEAL_OFFER: u8 = 0x1B;
    /// [`SealCert`](super::SealCert): a finalized seal's certificate with its ext, to the
    /// sequencers' and the standby's control ports (07 §9.4; a vyrn decision like the offer).
    pub const SEAL_CERT: u8 = 0x1C;
}

/// Most `extra` ranges per substream in a TailReport (07 §9.3).
pub const TAIL_EXTRA_MAX: usize = 64;
/// Bound on each substream's `direct` bitmap, bytes (project bound: 8M frames, far beyond the
/// ≤ 64-block tail of a seal).
pub const TAIL_DIRECT_MAX_BYTES: usize = 1 << 20;
/// Most frame bytes in a TailConflict: the VLAN MTU (07 §3.1).
pub const TAIL_CONFLICT_MAX_BYTES: usize = 9216;
/// Facility of the warm standby, F2 (07 §9.5, §13.1). Facilities are numbered from 1 (F1).
pub const STANDBY_FACILITY: u8 = 2;

/// The body of one control message (private: the public API is the generated inherent methods).
trait Body: Sized {
    /// Semantic checks shared by `encode` (before writing) and `parse` (after reading).
    fn check(&self) -> Result<(), Malformed> {
        Ok(())
    }
    /// Append the body (after the type byte).
    fn write_body(&self, out: &mut Vec<u8>);
    /// Read the body; every count is checked against the bytes present before allocating.
    fn read_body(r: &mut Reader<'_>) -> Result<Self, Malformed>;
}

macro_rules! ctrl_codec {
    ($t:ty, $code:expr) => {
        impl $t {
            /// Message type byte.
            pub const TYPE: u8 = $code;

            /// Append the message (type byte, then body). Fails, writing nothing, where `parse`
            /// would fail.
            pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), Malformed> {
                Body::check(self)?;
                out.push(Self::TYPE);
                self.write_body(out);
                Ok(())
            }

            /// The message bytes.
            pub fn to_bytes(&self) -> Result<Vec<u8>, Malformed> {
                let mut v = Vec::new();
                self.encode(&mut v)?;
                Ok(v)
            }

            /// Parse exactly one whole message, type byte included.
            pub fn parse(b: &[u8]) -> Result<Self, Malformed> {
                let mut r = Reader::new(b);
                if r.u8()? != Self::TYPE {
                    return Err(Malformed::BadKind);
                }
                let m = <Self as Body>::read_body(&mut r)?;
                finish(&r)?;
                Body::check(&m)?;
                Ok(m)
            }
        }
    };
}

fn check_stream(stream: u8) -> Result<(), Malformed> {
    if stream > 1 {
        return Err(Malformed::BadValue);
    }
    Ok(())
}

fn read_bool(r: &mut Reader<'_>) -> Result<bool, Malformed> {
    match r.u8()? {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(Malformed::BadValue),
    }
}

// ---------------------------------------------------------------------------------------------

/// `RepAck`, every `REP_ACK_US` from each voter and the standby to each stream core (07 §4.8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct RepAck {
    /// Epoch.
    pub epoch: u32,
    /// Tenure.
    pub tenure: u8,
    /// Highest frame_seq held contiguously from 1, per substream `[A, B]`.
    pub contiguous_frame_seq: [u64; 2],
    /// bit 0: path A delivered a frame within `REP_ACK_LIVE_US`; bit 1: path B; others 0.
    pub path_mask: u8,
}

impl Body for RepAck {
    fn check(&self) -> Result<(), Malformed> {
        if self.path_mask & !0b11 != 0 {
            return Err(Malformed::Reserved);
        }
        Ok(())
    }
    fn write_body(&self, out: &mut Vec<u8>) {
        put_u32(out, self.epoch);
        out.push(self.tenure);
        put_u64(out, self.contiguous_frame_seq[0]);
        put_u64(out, self.contiguous_frame_seq[1]);
        out.push(self.path_mask);
    }
    fn read_body(r: &mut Reader<'_>) -> Result<Self, Malformed> {
        Ok(RepAck {
            epoch: r.u32_le()?,
            tenure: r.u8()?,
            contiguous_frame_seq: [r.u64_le()?, r.u64_le()?],
            path_mask: r.u8()?,
        })
    }
}
ctrl_codec!(RepAck, ty::REP_ACK);

mod redirect;
mod seal;
mod vote;
pub use redirect::{DataRedirect, SeqChange};
pub use seal::{SealCert, SealOffer, SEAL_MSG_UNAVAIL_MAX};
pub use vote::FinalizeVote;

fn check_range(stream: u8, from: u64, to: u64) -> Result<(), Malformed> {
    check_stream(stream)?;
    // frame_seq starts at 1 (07 §2.2); a request names at most NACK_SPAN_MAX frames (a
    // replica's repair window), so no server walks an attacker's range.
    if from == 0 || from > to || to - from >= crate::consts::NACK_SPAN_MAX {
        return Err(Malformed::BadValue);
    }
    Ok(())
}

/// A request for the frames `from_seq ..= to_seq` of one substream: `Nack` and `RepairReq`
/// share this layout (07 §4.10) and differ only in their type byte and destination.
macro_rules! frame_range_msg {
    ($(#[$doc:meta])* $name:ident, $code:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
        pub struct $name {
            /// Epoch.
            pub epoch: u32,
            /// Tenure.
            pub tenure: u8,
            /// Substream, 0 or 1.
            pub stream: u8,
            /// First frame_seq wanted, ≥ 1.
            pub from_seq: u64,
            /// Last frame_seq wanted, ≥ `from_seq`, less than
            /// [`NACK_SPAN_MAX`](crate::consts::NACK_SPAN_MAX) past it.
            pub to_seq: u64,
        }

        impl Body for $name {
            fn check(&self) -> Result<(), Malformed> {
                check_range(self.stream, self.from_seq, self.to_seq)
            }
            fn write_body(&self, out: &mut Vec<u8>) {
                put_u32(out, self.epoch);
                out.push(self.tenure);
                out.push(self.stream);
                put_u64(out, self.from_seq);
                put_u64(out, self.to_seq);
            }
            fn read_body(r: &mut Reader<'_>) -> Result<Self, Malformed> {
                Ok($name {
                    epoch: r.u32_le()?,
                    tenure: r.u8()?,
                    stream: r.u8()?,
                    from_seq: r.u64_le()?,
                    to_seq: r.u64_le()?,
                })
            }
        }
        ctrl_codec!($name, $code);
    };
}

frame_range_msg!(
    /// `Nack`: retransmit request to the substream's stream core (07 §4.10).
    Nack,
    ty::NACK
);

/// `NackTooOld`: the NACKed frame has left the retransmit ring (07 §4.10). Signed by the
/// sequencer (`seq_sig` under the tenure's `seq_key` over `"vyrn v1 nack too old" ‖ epoch ‖
/// tenure ‖ stream ‖ oldest_seq`): a replica that takes one stops NACKing the box below
/// `oldest_seq`, so an unsigned one let anyone cut a replica off from its repairs (security
/// review F17).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NackTooOld {
    /// Epoch.
    pub epoch: u32,
    /// Tenure.
    pub tenure: u8,
    /// Substream, 0 or 1.
    pub stream: u8,
    /// Oldest frame_seq the ring still holds.
    pub oldest_seq: u64,
    /// Ed25519 signature under `seq_key` ([`NackTooOld::sign`]).
    pub seq_sig: [u8; 64],
}

impl NackTooOld {
    /// The bytes `seq_sig` covers.
    fn signed(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(domain::NACK_TOO_OLD.len() + 14);
        b.extend_from_slice(domain::NACK_TOO_OLD);
        put_u32(&mut b, self.epoch);
        b.push(self.tenure);
        b.push(self.stream);
        put_u64(&mut b, self.oldest_seq);
        b
    }

    /// An answer signed with the sequencer's key.
    pub fn sign(epoch: u32, tenure: u8, stream: u8, oldest_seq: u64, key: &SigningKey) -> Self {
        let mut m = NackTooOld {
            epoch,
            tenure,
            stream,
            oldest_seq,
            seq_sig: [0; 64],
        };
        m.seq_sig = key.sign(&m.signed()).to_bytes();
        m
    }

    /// Whether `seq_sig` verifies under `key` (strict Ed25519).
    pub fn verify(&self, key: &VerifyingKey) -> bool {
        key.verify_strict(&self.signed(), &Signature::from_bytes(&self.seq_sig))
            .is_ok()
    }
}

impl Body for NackTooOld {
    fn check(&self) -> Result<(), Malformed> {
        check_stream(self.stream)
    }
    fn write_body(&self, out: &mut Vec<u8>) {
        put_u32(out, self.epoch);
        out.push(self.tenure);
        out.push(self.stream);
        put_u64(out, self.oldest_seq);
        out.extend_from_slice(&self.seq_sig);
    }
    fn read_body(r: &mut Reader<'_>) -> Result<Self, Malformed> {
        Ok(NackTooOld {
            epoch: r.u32_le()?,
            tenure: r.u8()?,
            stream: r.u8()?,
            oldest_seq: r.u64_le()?,
            seq_sig: r.array::<64>()?,
        })
    }
}
ctrl_codec!(NackTooOld, ty::NACK_TOO_OLD);

frame_range_msg!(
    /// `RepairReq`: peer repair request (07 §4.10).
    RepairReq,
    ty::REPAIR_REQ
);

/// `DataFetch`, to a data box (07 §5.3 by range, §5.5 by key). Answered with `FETCH_RESP` frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DataFetch {
    /// A gap of this data box's `data_seq` toward the requester, `from ≤ to` (07 §5.3).
    Range {
        /// First data_seq.
        from: u64,
        /// Last data_seq.
        to: u64,
    },
    /// One packet by join key (07 §5.5 source 1).
    Key(PktKey),
}

impl DataFetch {
    /// Type byte of this form.
    pub fn msg_type(&self) -> u8 {
        match self {
            DataFetch::Range { .. } => ty::DATA_FETCH_RANGE,
            DataFetch::Key(_) => ty::DATA_FETCH_KEY,
        }
    }

    /// Append the message; a reversed range fails with `BadValue`.
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), Malformed> {
        match *self {
            DataFetch::Range { from, to } => {
                if from > to {
                    return Err(Malformed::BadValue);
                }
                out.push(ty::DATA_FETCH_RANGE);
                put_u64(out, from);
                put_u64(out, to);
            }
            DataFetch::Key(k) => {
                out.push(ty::DATA_FETCH_KEY);
                k.encode(out);
            }
        }
        Ok(())
    }

    /// The message bytes.
    pub fn to_bytes(&self) -> Result<Vec<u8>, Malformed> {
        let mut v = Vec::new();
        self.encode(&mut v)?;
        Ok(v)
    }

    /// Parse exactly one whole message of either form.
    pub fn parse(b: &[u8]) -> Result<Self, Malformed> {
        let mut r = Reader::new(b);
        let m = match r.u8()? {
            ty::DATA_FETCH_RANGE => {
                let (from, to) = (r.u64_le()?, r.u64_le()?);
                if from > to {
                    return Err(Malformed::BadValue);
                }
                DataFetch::Range { from, to }
            }
            ty::DATA_FETCH_KEY => DataFetch::Key(PktKey::read(&mut r)?),
            _ => return Err(Malformed::BadKind),
        };
        finish(&r)?;
        Ok(m)
    }
}

/// `HashListReq`: a block's full-hash list from the order hasher, core 50 (07 §5.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct HashListReq {
    /// Height.
    pub height: u64,
}

impl Body for HashListReq {
    fn write_body(&self, out: &mut Vec<u8>) {
        put_u64(out, self.height);
    }
    fn read_body(r: &mut Reader<'_>) -> Result<Self, Malformed> {
        Ok(HashListReq {
            height: r.u64_le()?,
        })
    }
}
ctrl_codec!(HashListReq, ty::HASH_LIST_REQ);

/// Full hashes one `HashList` part carries at most (8 KiB of hashes: one jumbo datagram).
pub const HASH_LIST_PART_MAX: usize = 256;

/// `HashList`: part `part` of `parts` of substream `stream`'s full-hash list of block `height`,
/// the 32-byte BLAKE3 of each packet in O-order (the leaves of `data_root_H`, 07 §6.1), from
/// the order hasher (07 §4.6). `first` is the index of the first hash in the whole list.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct HashList {
    /// Height.
    pub height: u64,
    /// Substream (0 = A, 1 = B).
    pub stream: u8,
    /// This part, from 0.
    pub part: u16,
    /// Parts of this substream's list (≥ 1; an empty list is one empty part).
    pub parts: u16,
    /// Index of the first hash of this part in the substream's list.
    pub first: u32,
    /// The hashes, at most [`HASH_LIST_PART_MAX`].
    pub hashes: Vec<[u8; 32]>,
}

impl Body for HashList {
    fn check(&self) -> Result<(), Malformed> {
        check_stream(self.stream)?;
        if self.parts == 0 || self.part >= self.parts || self.hashes.len() > HASH_LIST_PART_MAX {
            return Err(Malformed::BadValue);
        }
        Ok(())
    }
    fn write_body(&self, out: &mut Vec<u8>) {
        put_u64(out, self.height);
        out.push(self.stream);
        put_u16(out, self.part);
        put_u16(out, self.parts);
        put_u32(out, self.first);
        put_u16(out, self.hashes.len() as u16);
        for h in &self.hashes {
            out.extend_from_slice(h);
        }
    }
    fn read_body(r: &mut Reader<'_>) -> Result<Self, Malformed> {
        let height = r.u64_le()?;
        let stream = r.u8()?;
        let part = r.u16_le()?;
        let parts = r.u16_le()?;
        let first = r.u32_le()?;
        let n = r.u16_le()? as usize;
        if n > HASH_LIST_PART_MAX {
            return Err(Malformed::BadValue);
        }
        // The count is checked against the bytes present before allocating.
        let raw = r.bytes(n * 32)?;
        let hashes = raw
            .chunks_exact(32)
            .map(|c| {
                let mut h = [0u8; 32];
                h.copy_from_slice(c);
                h
            })
            .collect();
        Ok(HashList {
            height,
            stream,
            part,
            parts,
            first,
            hashes,
        })
    }
}
ctrl_codec!(HashList, ty::HASH_LIST);

impl HashList {
    /// The parts of one substream's list.
    pub fn split(height: u64, stream: u8, hashes: &[[u8; 32]]) -> Vec<HashList> {
        let chunks: Vec<&[[u8; 32]]> = if hashes.is_empty() {
            vec![&[]]
        } else {
            hashes.chunks(HASH_LIST_PART_MAX).collect()
        };
        let parts = chunks.len() as u16;
        chunks
            .into_iter()
            .enumerate()
            .map(|(i, c)| HashList {
                height,
                stream,
                part: i as u16,
                parts,
                first: (i * HASH_LIST_PART_MAX) as u32,
                hashes: c.to_vec(),
            })
            .collect()
    }
}

// ---------------------------------------------------------------------------------------------

/// A range `[a, b]` of frame_seq, both ends included (07 §9.3 `extra`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct FrameRange {
    /// First frame_seq.
    pub a: u64,
    /// Last frame_seq, ≥ `a`.
    pub b: u64,
}

/// `TailReport` (07 §9.3): what a voter or the standby holds of the tenure's tail. Every frame
/// quantity is a pair, index 0 = substream A, 1 = substream B.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TailReport {
    /// Epoch.
    pub epoch: u32,
    /// Tenure.
    pub tenure: u8,
    /// Reporter's index (voter index, or sequencer index for the standby).
    pub reporter: u8,
    /// `H_i`: highest height with a valid header and every ORDER frame through its mark.
    pub h_i: u64,
    /// `F_i`: highest frame_seq such that frames 1..=F_i are all held, per substream.
    pub f_i: [u64; 2],
    /// `extra`: ≤ 64 maximal ranges held above `F_i`, per substream, ascending, each starting
    /// ≥ 2 past the previous end (≥ `F_i + 2` for the first: `F_i + 1` is missing by definition).
    pub extra: [Vec<FrameRange>; 2],
    /// `direct`, per substream: bit k (LSB first) covers the k-th frame of (H_i's mark, F_i]
    /// followed by the `extra` frames in order; 1 = received from a sequencer path. At most
    /// [`TAIL_DIRECT_MAX_BYTES`] bytes each.
    pub direct: [Vec<u8>; 2],
    /// PTP time of the newest frame of the tenure received.
    pub t_last_rx: u64,
    /// Replay lag, µs (07 §9.5).
    pub replay_lag_us: u32,
    /// `promotable` (07 §9.5), a u8 0/1 on the wire.
    pub promotable: bool,
    /// Ed25519 by the reporter over [`signed_bytes`](Self::signed_bytes).
    pub sig: [u8; 64],
}

impl TailReport {
    /// The bytes `sig` covers: every field above it, in wire order (07 §9.3 "over the above"),
    /// without the message type byte.
    pub fn signed_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 + self.direct[0].len() + self.direct[1].len());
        self.write_unsigned(&mut out);
        out
    }

    /// Sign with the reporter's key (a voter's vote key, the standby's seq_key).
    pub fn sign(&mut self, key: &SigningKey) {
        self.sig = key.sign(&self.signed_bytes()).to_bytes();
    }

    /// Verify `sig` under `key` (strict).
    pub fn verify(&self, key: &VerifyingKey) -> bool {
        key.verify_strict(&self.signed_bytes(), &Signature::from_bytes(&self.sig))
            .is_ok()
    }

    fn write_unsigned(&self, out: &mut Vec<u8>) {
        put_u32(out, self.epoch);
        out.push(self.tenure);
        out.push(self.reporter);
        put_u64(out, self.h_i);
        put_u64(out, self.f_i[0]);
        put_u64(out, self.f_i[1]);
        for ranges in &self.extra {
            out.push(ranges.len() as u8);
            for x in ranges {
                put_u64(out, x.a);
                put_u64(out, x.b);
            }
        }
        for d in &self.direct {
            put_u32(out, d.len() as u32);
            out.extend_from_slice(d);
        }
        put_u64(out, self.t_last_rx);
        put_u32(out, self.replay_lag_us);
        out.push(self.promotable as u8);
    }
}

impl Body for TailReport {
    fn check(&self) -> Result<(), Malformed> {
        for s in 0..2 {
            if self.extra[s].len() > TAIL_EXTRA_MAX || self.direct[s].len() > TAIL_DIRECT_MAX_BYTES
            {
                return Err(Malformed::TooMany);
            }
            // The next range must start at or above `min`.
            let mut min = self.f_i[s].checked_add(2);
            for x in &self.extra[s] {
                match min {
                    Some(m) if x.a >= m && x.b >= x.a => min = x.b.checked_add(2),
                    _ => return Err(Malformed::BadValue),
                }
            }
        }
        Ok(())
    }
    fn write_body(&self, out: &mut Vec<u8>) {
        self.write_unsigned(out);
        out.extend_from_slice(&self.sig);
    }
    fn read_body(r: &mut Reader<'_>) -> Result<Self, Malformed> {
        let epoch = r.u32_le()?;
        let tenure = r.u8()?;
        let reporter = r.u8()?;
        let h_i = r.u64_le()?;
        let f_i = [r.u64_le()?, r.u64_le()?];
        let mut extra: [Vec<FrameRange>; 2] = Default::default();
        for e in extra.iter_mut() {
            let n = r.u8()? as usize;
            if n > TAIL_EXTRA_MAX {
                return Err(Malformed::TooMany);
            }
            if n * 16 > r.remaining() {
                return Err(Malformed::Truncated);
            }
            e.reserve_exact(n);
            for _ in 0..n {
                e.push(FrameRange {
                    a: r.u64_le()?,
                    b: r.u64_le()?,
                });
            }
        }
        let mut direct: [Vec<u8>; 2] = Default::default();
        for d in direct.iter_mut() {
            let n = r.u32_le()? as usize;
            if n > TAIL_DIRECT_MAX_BYTES {
                return Err(Malformed::TooMany);
            }
            *d = r.bytes(n)?.to_vec();
        }
        Ok(TailReport {
            epoch,
            tenure,
            reporter,
            h_i,
            f_i,
            extra,
            direct,
            t_last_rx: r.u64_le()?,
            replay_lag_us: r.u32_le()?,
            promotable: read_bool(r)?,
            sig: r.array()?,
        })
    }
}
ctrl_codec!(TailReport, ty::TAIL_REPORT);

/// Why a voter suspects the sequencer (07 §9.1, §10.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum SilenceReason {
    /// No frame of the tenure on either path for `FAILOVER_SILENCE_MS`.
    Silence = 0,
    /// Valid equivocation evidence (`EQUIV`, §10.1).
    Equiv = 1,
    /// A block failed `order_root` after repair from the sequencer and every peer.
    OrderRoot = 2,
    /// `REP_E_HASHLAG` fired.
    HashLag = 3,
}

impl SilenceReason {
    /// From the wire byte.
    pub fn from_u8(b: u8) -> Option<Self> {
        Some(match b {
            0 => SilenceReason::Silence,
            1 => SilenceReason::Equiv,
            2 => SilenceReason::OrderRoot,
            3 => SilenceReason::HashLag,
            _ => return None,
        })
    }
}

/// `Silence` (07 §9.1): a voter's suspicion with its TailReport; `epoch` and `tenure` equal the
/// report's. The report's `sig` is the message's signature.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Silence {
    /// Epoch.
    pub epoch: u32,
    /// Tenure being deposed.
    pub tenure: u8,
    /// Sequencer index of the suspected sequencer.
    pub seq: u8,
    /// Why.
    pub reason: SilenceReason,
    /// The sender's TailReport (body only, no type byte).
    pub report: TailReport,
}

impl Body for Silence {
    fn check(&self) -> Result<(), Malformed> {
        if self.report.epoch != self.epoch || self.report.tenure != self.tenure {
            return Err(Malformed::BadValue);
        }
        self.report.check()
    }
    fn write_body(&self, out: &mut Vec<u8>) {
        put_u32(out, self.epoch);
        out.push(self.tenure);
        out.push(self.seq);
        out.push(self.reason as u8);
        self.report.write_body(out);
    }
    fn read_body(r: &mut Reader<'_>) -> Result<Self, Malformed> {
        Ok(Silence {
            epoch: r.u32_le()?,
            tenure: r.u8()?,
            seq: r.u8()?,
            reason: SilenceReason::from_u8(r.u8()?).ok_or(Malformed::BadValue)?,
            report: TailReport::read_body(r)?,
        })
    }
}
ctrl_codec!(Silence, ty::SILENCE);

/// `TailConflict` (07 §9.3 item 3): a voter's bytes for a tail frame that differ from the
/// leader's.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct TailConflict {
    /// The conflicting frame_seq.
    pub frame_seq: u64,
    /// Substream, 0 or 1.
    pub stream: u8,
    /// The voter's copy of the frame, ≤ [`TAIL_CONFLICT_MAX_BYTES`].
    pub bytes: Vec<u8>,
    /// Whether the voter received it from a sequencer path (u8 0/1 on the wire).
    pub direct: bool,
}

impl Body for TailConflict {
    fn check(&self) -> Result<(), Malformed> {
        check_stream(self.stream)?;
        if self.bytes.len() > TAIL_CONFLICT_MAX_BYTES {
            return Err(Malformed::TooMany);
        }
        Ok(())
    }
    fn write_body(&self, out: &mut Vec<u8>) {
        put_u64(out, self.frame_seq);
        out.push(self.stream);
        put_u16(out, self.bytes.len() as u16);
        out.extend_from_slice(&self.bytes);
        out.push(self.direct as u8);
    }
    fn read_body(r: &mut Reader<'_>) -> Result<Self, Malformed> {
        let frame_seq = r.u64_le()?;
        let stream = r.u8()?;
        let n = r.u16_le()? as usize;
        if n > TAIL_CONFLICT_MAX_BYTES {
            return Err(Malformed::TooMany);
        }
        let bytes = r.bytes(n)?.to_vec();
        Ok(TailConflict {
            frame_seq,
            stream,
            bytes,
            direct: read_bool(r)?,
        })
    }
}
ctrl_codec!(TailConflict, ty::TAIL_CONFLICT);

// ---------------------------------------------------------------------------------------------

/// Why a [`SeqEquivocation`] is not valid evidence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EquivocationError {
    /// A header is not for the evidence's `(epoch, height)`.
    WrongSlot,
    /// The two headers sign the same bytes (0..126): no equivocation.
    Identical,
    /// `header_a`'s `seq_sig` does not verify.
    BadSigA,
    /// `header_b`'s `seq_sig` does not verify.
    BadSigB,
}

impl fmt::Display for EquivocationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            EquivocationError::WrongSlot => "header not for (epoch, height)",
            EquivocationError::Identical => "headers sign identical bytes",
            EquivocationError::BadSigA => "header_a seq_sig invalid",
            EquivocationError::BadSigB => "header_b seq_sig invalid",
        })
    }
}

impl std::error::Error for EquivocationError {}

/// `SeqEquivocation` (07 §10.1): two signed headers for one `(epoch, height)`, self-verifying.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeqEquivocation {
    /// Epoch.
    pub epoch: u32,
    /// Height.
    pub height: u64,
    /// First header (190 B on the wire).
    pub header_a: BlockHeader,
    /// Second header (190 B on the wire).
    pub header_b: BlockHeader,
}

impl SeqEquivocation {
    /// Valid evidence against the sequencer whose key is `key`: both headers are for
    /// `(epoch, height)`, their signed bytes differ, and both `seq_sig`s verify.
    pub fn check(&self, key: &VerifyingKey) -> Result<(), EquivocationError> {
        for h in [&self.header_a, &self.header_b] {
            if h.epoch != self.epoch || h.height != self.height {
                return Err(EquivocationError::WrongSlot);
            }
        }
        if self.header_a.signed_bytes() == self.header_b.signed_bytes() {
            return Err(EquivocationError::Identical);
        }
        if !self.header_a.verify(key) {
            return Err(EquivocationError::BadSigA);
        }
        if !self.header_b.verify(key) {
            return Err(EquivocationError::BadSigB);
        }
        Ok(())
    }
}

impl Body for SeqEquivocation {
    fn write_body(&self, out: &mut Vec<u8>) {
        put_u32(out, self.epoch);
        put_u64(out, self.height);
        out.extend_from_slice(&self.header_a.to_bytes());
        out.extend_from_slice(&self.header_b.to_bytes());
    }
    fn read_body(r: &mut Reader<'_>) -> Result<Self, Malformed> {
        Ok(SeqEquivocation {
            epoch: r.u32_le()?,
            height: r.u64_le()?,
            header_a: BlockHeader::parse(r.bytes(BLOCK_HEADER_BYTES)?)?,
            header_b: BlockHeader::parse(r.bytes(BLOCK_HEADER_BYTES)?)?,
        })
    }
}
ctrl_codec!(SeqEquivocation, ty::SEQ_EQUIVOCATION);

/// `REP_DurableMark` (07 §6.9): Q voters hold the frames up to `need_A(step)` and `need_B(step)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct RepDurableMark {
    /// Epoch.
    pub epoch: u32,
    /// Tenure.
    pub tenure: u8,
    /// Durable StepId.
    pub step: u64,
    /// Height holding `step`.
    pub height: u64,
}

impl Body for RepDurableMark {
    fn write_body(&self, out: &mut Vec<u8>) {
        put_u32(out, self.epoch);
        out.push(self.tenure);
        put_u64(out, self.step);
        put_u64(out, self.height);
    }
    fn read_body(r: &mut Reader<'_>) -> Result<Self, Malformed> {
        Ok(RepDurableMark {
            epoch: r.u32_le()?,
            tenure: r.u8()?,
            step: r.u64_le()?,
            height: r.u64_le()?,
        })
    }
}
ctrl_codec!(RepDurableMark, ty::REP_DURABLE_MARK);

/// Why a voter raised `REP_A_DIVERGE` (07 §7.4, INV-REP-9).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DivergeReason {
    /// Two different root digests for one index, each with ≥ f + 1 valid signatures.
    Conflict = 0,
    /// No digest reached Q signatures REP_ROOT_TIMEOUT_MS after the root height was final.
    Timeout = 1,
}

/// One root digest of a [`Diverge`] with the signatures this voter holds for it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DivergeDigest {
    /// `BLAKE3("vyrn v1 root" ‖ epoch ‖ h ‖ R(h))` as signed.
    pub digest: Hash,
    /// Root-vote signatures over it, strictly ascending voter index (0..=MAX_MEMBERS).
    pub sigs: Vec<CertEntry>,
}

/// `Diverge{index, digests, sigs}` (07 §7.4): a voter that raised `REP_A_DIVERGE` tells the
/// sequencer's control core, which halts the book with a `Control(Halt)` step. Layout:
/// `epoch u32 ‖ index u64 ‖ reason u8 ‖ count u8 ‖ count × (digest [32] ‖ n u8 ‖ n × (voter
/// u8 ‖ sig [64]))`, at most MAX_MEMBERS digests; a timeout carries the digests seen so far
/// (possibly none).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Diverge {
    /// Epoch.
    pub epoch: u32,
    /// The root index `(h + 1) / REP_ROOT_BLOCKS − 1`.
    pub index: u64,
    /// Which case of INV-REP-9.
    pub reason: DivergeReason,
    /// The digests seen for the index and their signatures.
    pub digests: Vec<DivergeDigest>,
}

impl Body for Diverge {
    fn check(&self) -> Result<(), Malformed> {
        if self.digests.len() > MAX_MEMBERS {
            return Err(Malformed::TooMany);
        }
        if self.reason == DivergeReason::Conflict && self.digests.len() < 2 {
            return Err(Malformed::BadValue);
        }
        for d in &self.digests {
            crate::msg::consensus::check_entries(&d.sigs, 0)?;
        }
        Ok(())
    }
    fn write_body(&self, out: &mut Vec<u8>) {
        put_u32(out, self.epoch);
        put_u64(out, self.index);
        out.push(self.reason as u8);
        out.push(self.digests.len() as u8);
        for d in &self.digests {
            out.extend_from_slice(&d.digest);
            // Checked by `check` before any write.
            let _ = write_entries(out, &d.sigs, 0);
        }
    }
    fn read_body(r: &mut Reader<'_>) -> Result<Self, Malformed> {
        let epoch = r.u32_le()?;
        let index = r.u64_le()?;
        let reason = match r.u8()? {
            0 => DivergeReason::Conflict,
            1 => DivergeReason::Timeout,
            _ => return Err(Malformed::BadValue),
        };
        let n = r.u8()? as usize;
        if n > MAX_MEMBERS {
            return Err(Malformed::TooMany);
        }
        // Each digest takes at least 33 bytes: checked before allocating.
        if n * 33 > r.remaining() {
            return Err(Malformed::Truncated);
        }
        let mut digests = Vec::with_capacity(n);
        for _ in 0..n {
            digests.push(DivergeDigest {
                digest: r.array()?,
                sigs: read_entries_bounded(r, 0)?,
            });
        }
        Ok(Diverge {
            epoch,
            index,
            reason,
            digests,
        })
    }
}
ctrl_codec!(Diverge, ty::DIVERGE);

/// `DataBadMac` (07 §5.2): a data box's report of a packet whose tag failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct DataBadMac {
    /// SessionId.
    pub session: u32,
    /// pkt_seq.
    pub pkt_seq: u32,
}

impl Body for DataBadMac {
    fn write_body(&self, out: &mut Vec<u8>) {
        put_u32(out, self.session);
        put_u32(out, self.pkt_seq);
    }
    fn read_body(r: &mut Reader<'_>) -> Result<Self, Malformed> {
        Ok(DataBadMac {
            session: r.u32_le()?,
            pkt_seq: r.u32_le()?,
        })
    }
}
ctrl_codec!(DataBadMac, ty::DATA_BAD_MAC);

/// `CopyConflict` (07 §5.2): two packets under one `(session, pkt_seq)` with different full
/// hashes (client equivocation). The packets themselves travel as a FETCH_RESP data frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct CopyConflict {
    /// SessionId.
    pub session: u32,
    /// pkt_seq.
    pub pkt_seq: u32,
    /// Full hash of the first (forwarded) copy.
    pub h1: Hash,
    /// Full hash of the second copy; differs from `h1`.
    pub h2: Hash,
}

impl Body for CopyConflict {
    fn check(&self) -> Result<(), Malformed> {
        if self.h1 == self.h2 {
            return Err(Malformed::BadValue);
        }
        Ok(())
    }
    fn write_body(&self, out: &mut Vec<u8>) {
        put_u32(out, self.session);
        put_u32(out, self.pkt_seq);
        out.extend_from_slice(&self.h1);
        out.extend_from_slice(&self.h2);
    }
    fn read_body(r: &mut Reader<'_>) -> Result<Self, Malformed> {
        Ok(CopyConflict {
            session: r.u32_le()?,
            pkt_seq: r.u32_le()?,
            h1: r.array()?,
            h2: r.array()?,
        })
    }
}
ctrl_codec!(CopyConflict, ty::COPY_CONFLICT);

/// `DataDown` (07 §5.7): gossip that data box `d` is silent; Q of them make it effective.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct DataDown {
    /// Data box index.
    pub d: u8,
}

impl Body for DataDown {
    fn write_body(&self, out: &mut Vec<u8>) {
        out.push(self.d);
    }
    fn read_body(r: &mut Reader<'_>) -> Result<Self, Malformed> {
        Ok(DataDown { d: r.u8()? })
    }
}
ctrl_codec!(DataDown, ty::DATA_DOWN);

/// One packet named by its key and its record's 8-byte hash, `session u32, pkt_seq u32 (≥ 1),
/// pkt_hash u64` (0: the asker has no HashRun for it yet): `PeerDataFetch` and `SeqDataReq` share
/// this layout (07 §5.5 sources 2 and 3) and differ only in their type byte and destination. The
/// hash names which copy: several packets can share one key (a conflicting duplicate the box
/// logged, `docs/wire.md` "What the box logs"), and the server answers the one whose `pkt_hash`
/// is asked.
macro_rules! pkt_key_msg {
    ($(#[$doc:meta])* $name:ident, $code:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
        pub struct $name {
            /// SessionId.
            pub session: u32,
            /// Its pkt_seq (≥ 1).
            pub pkt_seq: u32,
            /// The record's 8-byte hash (07 §3.7), 0 when the asker has none yet.
            pub pkt_hash: u64,
        }

        impl Body for $name {
            fn check(&self) -> Result<(), Malformed> {
                if self.pkt_seq == 0 {
                    return Err(Malformed::BadValue);
                }
                Ok(())
            }
            fn write_body(&self, out: &mut Vec<u8>) {
                put_u32(out, self.session);
                put_u32(out, self.pkt_seq);
                put_u64(out, self.pkt_hash);
            }
            fn read_body(r: &mut Reader<'_>) -> Result<Self, Malformed> {
                Ok($name {
                    session: r.u32_le()?,
                    pkt_seq: r.u32_le()?,
                    pkt_hash: r.u64_le()?,
                })
            }
        }
        ctrl_codec!($name, $code);
    };
}

/// One packet and its key, `session u32, pkt_seq u32 (≥ 1), pkt_len u16 (1..=REQ_MAX_LEN),
/// pkt`: `PeerData` and `SeqData` share this layout (answers to the two requests above; a vyrn
/// decision, 07 names only the requests). The asker checks the packet like a pushed copy.
macro_rules! pkt_msg {
    ($(#[$doc:meta])* $name:ident, $code:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Default)]
        pub struct $name {
            /// SessionId.
            pub session: u32,
            /// Its pkt_seq.
            pub pkt_seq: u32,
            /// The packet, 1..=[`REQ_MAX_LEN`](super::client::REQ_MAX_LEN) bytes.
            pub pkt: Vec<u8>,
        }

        impl Body for $name {
            fn check(&self) -> Result<(), Malformed> {
                check_pkt(self.pkt_seq, &self.pkt)
            }
            fn write_body(&self, out: &mut Vec<u8>) {
                put_pkt(out, self.session, self.pkt_seq, &self.pkt);
            }
            fn read_body(r: &mut Reader<'_>) -> Result<Self, Malformed> {
                let session = r.u32_le()?;
                let pkt_seq = r.u32_le()?;
                let n = r.u16_le()? as usize;
                if n > super::client::REQ_MAX_LEN {
                    return Err(Malformed::BadValue);
                }
                let pkt = r.bytes(n)?.to_vec();
                Ok($name {
                    session,
                    pkt_seq,
                    pkt,
                })
            }
        }
        ctrl_codec!($name, $code);

        impl $name {
            /// Append the message for `(session, pkt_seq, pkt)` without building the struct (no
            /// allocation). Writes nothing and returns false where `encode` would fail.
            pub fn encode_parts(session: u32, pkt_seq: u32, pkt: &[u8], out: &mut Vec<u8>) -> bool {
                if check_pkt(pkt_seq, pkt).is_err() {
                    return false;
                }
                out.push(Self::TYPE);
                put_pkt(out, session, pkt_seq, pkt);
                true
            }
        }
    };
}

fn check_pkt(pkt_seq: u32, pkt: &[u8]) -> Result<(), Malformed> {
    if pkt_seq == 0 || pkt.is_empty() || pkt.len() > super::client::REQ_MAX_LEN {
        return Err(Malformed::BadValue);
    }
    Ok(())
}

fn put_pkt(out: &mut Vec<u8>, session: u32, pkt_seq: u32, pkt: &[u8]) {
    put_u32(out, session);
    put_u32(out, pkt_seq);
    put_u16(out, pkt.len() as u16);
    out.extend_from_slice(pkt);
}

pkt_key_msg!(
    /// `PeerDataFetch` (07 §5.5 source 2): a replica asks one peer, round robin, for the packet
    /// `(session, pkt_seq)` after its data home did not answer in time.
    PeerDataFetch,
    ty::PEER_DATA_FETCH
);

pkt_msg!(
    /// `PeerData`: a peer's answer to [`PeerDataFetch`] — the request packet as that peer stored
    /// it. A peer that does not hold it says nothing (the asker moves to its next source).
    PeerData,
    ty::PEER_DATA
);

pkt_key_msg!(
    /// `SeqDataReq` (07 §5.5 source 3): a replica asks the sequencer's control core for the
    /// packet as its lane matched it — after the data home and a peer, and at once for a copy
    /// mismatch (§5.6). Served from lane packet retention (REP_SEQ_PKT_RETAIN_MS) at most
    /// REP_SEQ_DATA_MAX_PPS a second.
    SeqDataReq,
    ty::SEQ_DATA_REQ
);

pkt_msg!(
    /// `SeqData`: the sequencer's answer to [`SeqDataReq`] — the packet its lane matched, the
    /// canonical copy (07 §5.5: "the only source of the bytes the sequencer actually matched").
    /// A packet out of retention gets no answer.
    SeqData,
    ty::SEQ_DATA
);

// ---------------------------------------------------------------------------------------------

/// `REP_Membership.mode` (07 §13.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Mode {
    /// BASE: n = 4, Q = 3.
    Base = 0,
    /// CHAIN: n = 5, Q = 4.
    Chain = 1,
}

/// A voter's client implementation (07 §13.1, §11).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Client {
    /// The Rust client.
    Rust = 0,
    /// The independent Vx client.
    Vx = 1,
}

/// A `seq_order` box's role (07 §13.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum Role {
    /// The epoch's primary sequencer.
    Primary = 0,
    /// The warm standby, in F2.
    Standby = 1,
    /// A cold spare.
    Spare = 2,
}

/// One `REP_Membership.voters` entry (07 §13.1), 71 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Voter {
    /// Voter index; equals its position.
    pub index: u8,
    /// Ed25519 vote key.
    pub vote_key: [u8; 32],
    /// Client implementation.
    pub client: Client,
    /// Facility, 1 = F1.
    pub facility: u8,
    /// Data port address.
    pub data_addr: Addr18,
    /// Replication port address.
    pub repl_addr: Addr18,
}

/// One `REP_Membership.seq_order` entry (07 §13.1), 71 bytes. Only Rust `vyrn-seq` boxes are
/// listed, so there is no client field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SeqBox {
    /// Sequencer index; equals its position.
    pub index: u8,
    /// Primary, standby or spare.
    pub role: Role,
    /// Ed25519 key that signs headers (`seq_sig`).
    pub seq_key: [u8; 32],
    /// Facility, 1 = F1.
    pub facility: u8,
    /// Client port address.
    pub client_addr: Addr18,
    /// Replication port address.
    pub repl_addr: Addr18,
}

/// One `REP_Membership.data_boxes` entry (07 §13.1), 20 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DataBox {
    /// Data box index; equals its position (the data frame's `src`).
    pub index: u8,
    /// Facility, 1 = F1.
    pub facility: u8,
    /// `REP_UDP_DATA` address.
    pub addr: Addr18,
}

/// Why a `REP_Membership` breaks a rule of 07 §13.1 (semantic, after a clean parse).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MembershipError {
    /// `n` is not 4 (BASE) or 5 (CHAIN).
    BadSize,
    /// `q` is not `Q_BASE` (BASE) or `Q_CHAIN` (CHAIN).
    BadQuorum,
    /// `voters[i].index != i`.
    VoterIndex,
    /// One client's voter count reaches Q (`CLIENT_SPLIT`).
    ClientSplit,
    /// Two voters share a vote key, or two sequencer boxes a seq key.
    DuplicateKey,
    /// A key is both a `vote_key` and a `seq_key`.
    KeyReuse,
    /// `seq_order[i].index != i`.
    SeqIndex,
    /// Not exactly one primary.
    PrimaryCount,
    /// `seq_order` is not primary, then standby, then spares.
    SeqOrder,
    /// A standby outside F2.
    StandbyFacility,
    /// `recovery` names no voter.
    RecoveryUnknown,
    /// `recovery` names a Vx voter.
    RecoveryNotRust,
    /// `data_boxes[i].index != i`.
    DataBoxIndex,
    /// Fewer certificate entries than the certifying set's Q.
    CertTooFew,
    /// A certificate entry names no voter of the certifying set.
    CertIndex,
    /// A certifying voter's key is not a valid Ed25519 point.
    CertKey,
    /// A certificate signature does not verify.
    CertSig,
}

impl fmt::Display for MembershipError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

impl std::error::Error for MembershipError {}

/// `REP_Membership` (07 §13.1): a home's voters, sequencer boxes and data boxes for epochs from
/// `epoch_from`, certified by Q voters of the current set. `n` is `voters.len()`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RepMembership {
    /// First epoch this record applies to.
    pub epoch_from: u32,
    /// `HomeCode`.
    pub home: [u8; 4],
    /// BASE or CHAIN.
    pub mode: Mode,
    /// Quorum.
    pub q: u8,
    /// The voters, in index order (`n` on the wire is their count, ≤ [`MAX_MEMBERS`]).
    pub voters: Vec<Voter>,
    /// Sequencer boxes: primary, standby, spares (≤ [`MAX_MEMBERS`]).
    pub seq_order: Vec<SeqBox>,
    /// Voter index of the recovery service (07 §8.5).
    pub recovery: u8,
    /// Data boxes (≤ [`MAX_MEMBERS`]).
    pub data_boxes: Vec<DataBox>,
    /// Signatures of the current set's voters over [`body_digest`](Self::body_digest), strictly
    /// ascending index; may be empty in a record not yet certified.
    pub cert: Vec<CertEntry>,
}

/// Bytes of one voter entry.
pub const VOTER_BYTES: usize = 71;
/// Bytes of one seq_order entry.
pub const SEQ_BOX_BYTES: usize = 71;
/// Bytes of one data_boxes entry.
pub const DATA_BOX_BYTES: usize = 20;

fn read_count(r: &mut Reader<'_>, entry: usize) -> Result<usize, Malformed> {
    let n = r.u8()? as usize;
    if n > MAX_MEMBERS {
        return Err(Malformed::TooMany);
    }
    if n * entry > r.remaining() {
        return Err(Malformed::Truncated);
    }
    Ok(n)
}

impl RepMembership {
    /// The body: every field but `cert`, as on the wire (no type byte).
    pub fn body_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(
            16 + VOTER_BYTES * self.voters.len()
                + SEQ_BOX_BYTES * self.seq_order.len()
                + DATA_BOX_BYTES * self.data_boxes.len(),
        );
        self.write_plain_body(&mut out);
        out
    }

    /// `BLAKE3("vyrn v1 membership" ‖ body)`, the digest the certificate signs (07 §13.1).
    pub fn body_digest(&self) -> Hash {
        let mut h = blake3::Hasher::new();
        h.update(domain::MEMBERSHIP);
        h.update(&self.body_bytes());
        *h.finalize().as_bytes()
    }

    /// Sign the body digest as voter `index` of the current set (returns the entry to add).
    pub fn sign_entry(&self, index: u8, key: &SigningKey) -> CertEntry {
        CertEntry {
            index,
            sig: key.sign(&self.body_digest()).to_bytes(),
        }
    }

    fn write_plain_body(&self, out: &mut Vec<u8>) {
        put_u32(out, self.epoch_from);
        out.extend_from_slice(&self.home);
        out.push(self.mode as u8);
        out.push(self.voters.len() as u8);
        out.push(self.q);
        for v in &self.voters {
            out.push(v.index);
            out.extend_from_slice(&v.vote_key);
            out.push(v.client as u8);
            out.push(v.facility);
            out.extend_from_slice(&v.data_addr);
            out.extend_from_slice(&v.repl_addr);
        }
        out.push(self.seq_order.len() as u8);
        for s in &self.seq_order {
            out.push(s.index);
            out.push(s.role as u8);
            out.extend_from_slice(&s.seq_key);
            out.push(s.facility);
            out.extend_from_slice(&s.client_addr);
            out.extend_from_slice(&s.repl_addr);
        }
        out.push(self.recovery);
        out.push(self.data_boxes.len() as u8);
        for d in &self.data_boxes {
            out.push(d.index);
            out.push(d.facility);
            out.extend_from_slice(&d.addr);
        }
    }

    /// The rules of 07 §13.1 that the record itself can show: size and quorum for the mode,
    /// index = position everywhere, `CLIENT_SPLIT`, no key used twice or as both a vote key and
    /// a seq key, exactly one primary and primary → standby → spares order, the standby in F2,
    /// and `recovery` naming a Rust voter. (`seq_order` has no client field, so "names a Vx box"
    /// cannot be checked here; the 3600 s lead and the boundary are the caller's.)
    pub fn validate(&self) -> Result<(), MembershipError> {
        let (n, q) = match self.mode {
            Mode::Base => (N_BASE, Q_BASE),
            Mode::Chain => (N_CHAIN, Q_CHAIN),
        };
        if self.voters.len() != n as usize {
            return Err(MembershipError::BadSize);
        }
        if self.q != q {
            return Err(MembershipError::BadQuorum);
        }
        if self
            .voters
            .iter()
            .enumerate()
            .any(|(i, v)| v.index as usize != i)
        {
            return Err(MembershipError::VoterIndex);
        }
        for c in [Client::Rust, Client::Vx] {
            if self.voters.iter().filter(|v| v.client == c).count() >= q as usize {
                return Err(MembershipError::ClientSplit);
            }
        }
        let vote_keys: Vec<&[u8; 32]> = self.voters.iter().map(|v| &v.vote_key).collect();
        let seq_keys: Vec<&[u8; 32]> = self.seq_order.iter().map(|s| &s.seq_key).collect();
        for keys in [&vote_keys, &seq_keys] {
            for (i, k) in keys.iter().enumerate() {
                if keys[..i].contains(k) {
                    return Err(MembershipError::DuplicateKey);
                }
            }
        }
        if vote_keys.iter().any(|k| seq_keys.contains(k)) {
            return Err(MembershipError::KeyReuse);
        }
        if self
            .seq_order
            .iter()
            .enumerate()
            .any(|(i, s)| s.index as usize != i)
        {
            return Err(MembershipError::SeqIndex);
        }
        if self
            .seq_order
            .iter()
            .filter(|s| s.role == Role::Primary)
            .count()
            != 1
        {
            return Err(MembershipError::PrimaryCount);
        }
        let standbys = self
            .seq_order
            .iter()
            .filter(|s| s.role == Role::Standby)
            .count();
        if self.seq_order[0].role != Role::Primary
            || standbys > 1
            || !self.seq_order.windows(2).all(|w| w[0].role <= w[1].role)
        {
            return Err(MembershipError::SeqOrder);
        }
        if self
            .seq_order
            .iter()
            .any(|s| s.role == Role::Standby && s.facility != STANDBY_FACILITY)
        {
            return Err(MembershipError::StandbyFacility);
        }
        match self.voters.get(self.recovery as usize) {
            None => return Err(MembershipError::RecoveryUnknown),
            Some(v) if v.client != Client::Rust => return Err(MembershipError::RecoveryNotRust),
            Some(_) => {}
        }
        if self
            .data_boxes
            .iter()
            .enumerate()
            .any(|(i, d)| d.index as usize != i)
        {
            return Err(MembershipError::DataBoxIndex);
        }
        Ok(())
    }

    /// Check `cert` against the certifying (current) set: at least its Q entries, each naming
    /// one of its voters, each a valid strict Ed25519 signature over
    /// [`body_digest`](Self::body_digest) under that voter's `vote_key`.
    pub fn verify_cert(&self, current: &RepMembership) -> Result<(), MembershipError> {
        if self.cert.len() < current.q as usize {
            return Err(MembershipError::CertTooFew);
        }
        let digest = self.body_digest();
        for e in &self.cert {
            let v = current
                .voters
                .get(e.index as usize)
                .ok_or(MembershipError::CertIndex)?;
            let key =
                VerifyingKey::from_bytes(&v.vote_key).map_err(|_| MembershipError::CertKey)?;
            key.verify_strict(&digest, &Signature::from_bytes(&e.sig))
                .map_err(|_| MembershipError::CertSig)?;
        }
        Ok(())
    }
}

impl Body for RepMembership {
    fn check(&self) -> Result<(), Malformed> {
        if self.voters.len() > MAX_MEMBERS
            || self.seq_order.len() > MAX_MEMBERS
            || self.data_boxes.len() > MAX_MEMBERS
            || self.cert.len() > MAX_MEMBERS
        {
            return Err(Malformed::TooMany);
        }
        if !self.cert.windows(2).all(|w| w[0].index < w[1].index) {
            return Err(Malformed::BadValue);
        }
        Ok(())
    }
    fn write_body(&self, out: &mut Vec<u8>) {
        self.write_plain_body(out);
        // check() has already bounded and ordered the entries.
        let _ = write_entries(out, &self.cert, 0);
    }
    fn read_body(r: &mut Reader<'_>) -> Result<Self, Malformed> {
        let epoch_from = r.u32_le()?;
        let home = r.array()?;
        let mode = match r.u8()? {
            0 => Mode::Base,
            1 => Mode::Chain,
            _ => return Err(Malformed::BadValue),
        };
        let n = r.u8()? as usize;
        if n > MAX_MEMBERS {
            return Err(Malformed::TooMany);
        }
        let q = r.u8()?;
        if n * VOTER_BYTES > r.remaining() {
            return Err(Malformed::Truncated);
        }
        let mut voters = Vec::with_capacity(n);
        for _ in 0..n {
            voters.push(Voter {
                index: r.u8()?,
                vote_key: r.array()?,
                client: match r.u8()? {
                    0 => Client::Rust,
                    1 => Client::Vx,
                    _ => return Err(Malformed::BadValue),
                },
                facility: r.u8()?,
                data_addr: r.array()?,
                repl_addr: r.array()?,
            });
        }
        let k = read_count(r, SEQ_BOX_BYTES)?;
        let mut seq_order = Vec::with_capacity(k);
        for _ in 0..k {
            seq_order.push(SeqBox {
                index: r.u8()?,
                role: match r.u8()? {
                    0 => Role::Primary,
                    1 => Role::Standby,
                    2 => Role::Spare,
                    _ => return Err(Malformed::BadValue),
                },
                seq_key: r.array()?,
                facility: r.u8()?,
                client_addr: r.array()?,
                repl_addr: r.array()?,
            });
        }
        let recovery = r.u8()?;
        let m = read_count(r, DATA_BOX_BYTES)?;
        let mut data_boxes = Vec::with_capacity(m);
        for _ in 0..m {
            data_boxes.push(DataBox {
                index: r.u8()?,
                facility: r.u8()?,
                addr: r.array()?,
            });
        }
        let cert = read_entries_bounded(r, 0)?;
        Ok(RepMembership {
            epoch_from,
            home,
            mode,
            q,
            voters,
            seq_order,
            recovery,
            data_boxes,
            cert,
        })
    }
}
ctrl_codec!(RepMembership, ty::REP_MEMBERSHIP);

// ---------------------------------------------------------------------------------------------

/// Any control message, by its type byte.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CtrlMsg {
    /// [`ty::REP_ACK`].
    RepAck(RepAck),
    /// [`ty::NACK`].
    Nack(Nack),
    /// [`ty::NACK_TOO_OLD`].
    NackTooOld(NackTooOld),
    /// [`ty::REPAIR_REQ`].
    RepairReq(RepairReq),
    /// [`ty::DATA_FETCH_RANGE`] or [`ty::DATA_FETCH_KEY`].
    DataFetch(DataFetch),
    /// [`ty::HASH_LIST_REQ`].
    HashListReq(HashListReq),
    /// [`ty::HASH_LIST`].
    HashList(HashList),
    /// [`ty::TAIL_REPORT`].
    TailReport(Box<TailReport>),
    /// [`ty::SILENCE`].
    Silence(Box<Silence>),
    /// [`ty::TAIL_CONFLICT`].
    TailConflict(TailConflict),
    /// [`ty::SEQ_EQUIVOCATION`].
    SeqEquivocation(Box<SeqEquivocation>),
    /// [`ty::REP_DURABLE_MARK`].
    RepDurableMark(RepDurableMark),
    /// [`ty::DATA_BAD_MAC`].
    DataBadMac(DataBadMac),
    /// [`ty::COPY_CONFLICT`].
    CopyConflict(CopyConflict),
    /// [`ty::DATA_DOWN`].
    DataDown(DataDown),
    /// [`ty::DATA_REDIRECT`].
    DataRedirect(DataRedirect),
    /// [`ty::SEQ_CHANGE`].
    SeqChange(SeqChange),
    /// [`ty::REP_MEMBERSHIP`].
    RepMembership(Box<RepMembership>),
    /// [`ty::FINALITY_CERT`]: the type byte, then the `REP_FinalityCert` bytes (07 §6.5).
    FinalityCert(Box<RepFinalityCert>),
    /// [`ty::FINALIZE_VOTE`].
    FinalizeVote(Box<FinalizeVote>),
    /// [`ty::DIVERGE`].
    Diverge(Box<Diverge>),
    /// [`ty::PEER_DATA_FETCH`].
    PeerDataFetch(PeerDataFetch),
    /// [`ty::PEER_DATA`].
    PeerData(PeerData),
    /// [`ty::SEQ_DATA_REQ`].
    SeqDataReq(SeqDataReq),
    /// [`ty::SEQ_DATA`].
    SeqData(SeqData),
    /// [`ty::SEAL_OFFER`].
    SealOffer(Box<SealOffer>),
    /// [`ty::SEAL_CERT`].
    SealCert(Box<SealCert>),
}

impl CtrlMsg {
    /// Parse one whole control message, dispatching on byte 0.
    pub fn parse(b: &[u8]) -> Result<Self, Malformed> {
        let t = *b.first().ok_or(Malformed::Truncated)?;
        Ok(match t {
            ty::REP_ACK => CtrlMsg::RepAck(RepAck::parse(b)?),
            ty::NACK => CtrlMsg::Nack(Nack::parse(b)?),
            ty::NACK_TOO_OLD => CtrlMsg::NackTooOld(NackTooOld::parse(b)?),
            ty::REPAIR_REQ => CtrlMsg::RepairReq(RepairReq::parse(b)?),
            ty::DATA_FETCH_RANGE | ty::DATA_FETCH_KEY => CtrlMsg::DataFetch(DataFetch::parse(b)?),
            ty::HASH_LIST_REQ => CtrlMsg::HashListReq(HashListReq::parse(b)?),
            ty::HASH_LIST => CtrlMsg::HashList(HashList::parse(b)?),
            ty::TAIL_REPORT => CtrlMsg::TailReport(Box::new(TailReport::parse(b)?)),
            ty::SILENCE => CtrlMsg::Silence(Box::new(Silence::parse(b)?)),
            ty::TAIL_CONFLICT => CtrlMsg::TailConflict(TailConflict::parse(b)?),
            ty::SEQ_EQUIVOCATION => CtrlMsg::SeqEquivocation(Box::new(SeqEquivocation::parse(b)?)),
            ty::REP_DURABLE_MARK => CtrlMsg::RepDurableMark(RepDurableMark::parse(b)?),
            ty::DATA_BAD_MAC => CtrlMsg::DataBadMac(DataBadMac::parse(b)?),
            ty::COPY_CONFLICT => CtrlMsg::CopyConflict(CopyConflict::parse(b)?),
            ty::DATA_DOWN => CtrlMsg::DataDown(DataDown::parse(b)?),
            ty::DATA_REDIRECT => CtrlMsg::DataRedirect(DataRedirect::parse(b)?),
            ty::SEQ_CHANGE => CtrlMsg::SeqChange(SeqChange::parse(b)?),
            ty::REP_MEMBERSHIP => CtrlMsg::RepMembership(Box::new(RepMembership::parse(b)?)),
            ty::FINALITY_CERT => CtrlMsg::FinalityCert(Box::new(RepFinalityCert::parse(&b[1..])?)),
            ty::FINALIZE_VOTE => CtrlMsg::FinalizeVote(Box::new(FinalizeVote::parse(b)?)),
            ty::DIVERGE => CtrlMsg::Diverge(Box::new(Diverge::parse(b)?)),
            ty::PEER_DATA_FETCH => CtrlMsg::PeerDataFetch(PeerDataFetch::parse(b)?),
            ty::PEER_DATA => CtrlMsg::PeerData(PeerData::parse(b)?),
            ty::SEQ_DATA_REQ => CtrlMsg::SeqDataReq(SeqDataReq::parse(b)?),
            ty::SEQ_DATA => CtrlMsg::SeqData(SeqData::parse(b)?),
            ty::SEAL_OFFER => CtrlMsg::SealOffer(Box::new(SealOffer::parse(b)?)),
            ty::SEAL_CERT => CtrlMsg::SealCert(Box::new(SealCert::parse(b)?)),
            _ => return Err(Malformed::BadKind),
        })
    }

    /// Append the message; fails, writing nothing, where `parse` would.
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), Malformed> {
        match self {
            CtrlMsg::RepAck(m) => m.encode(out),
            CtrlMsg::Nack(m) => m.encode(out),
            CtrlMsg::NackTooOld(m) => m.encode(out),
            CtrlMsg::RepairReq(m) => m.encode(out),
            CtrlMsg::DataFetch(m) => m.encode(out),
            CtrlMsg::HashListReq(m) => m.encode(out),
            CtrlMsg::HashList(m) => m.encode(out),
            CtrlMsg::TailReport(m) => m.encode(out),
            CtrlMsg::Silence(m) => m.encode(out),
            CtrlMsg::TailConflict(m) => m.encode(out),
            CtrlMsg::SeqEquivocation(m) => m.encode(out),
            CtrlMsg::RepDurableMark(m) => m.encode(out),
            CtrlMsg::DataBadMac(m) => m.encode(out),
            CtrlMsg::CopyConflict(m) => m.encode(out),
            CtrlMsg::DataDown(m) => m.encode(out),
            CtrlMsg::DataRedirect(m) => m.encode(out),
            CtrlMsg::SeqChange(m) => m.encode(out),
            CtrlMsg::RepMembership(m) => m.encode(out),
            CtrlMsg::FinalityCert(m) => {
                let start = out.len();
                out.push(ty::FINALITY_CERT);
                m.encode(out).inspect_err(|_| out.truncate(start))
            }
            CtrlMsg::FinalizeVote(m) => m.encode(out),
            CtrlMsg::Diverge(m) => m.encode(out),
            CtrlMsg::PeerDataFetch(m) => m.encode(out),
            CtrlMsg::PeerData(m) => m.encode(out),
            CtrlMsg::SeqDataReq(m) => m.encode(out),
            CtrlMsg::SeqData(m) => m.encode(out),
            CtrlMsg::SealOffer(m) => m.encode(out),
            CtrlMsg::SealCert(m) => m.encode(out),
        }
    }

    /// The message bytes.
    pub fn to_bytes(&self) -> Result<Vec<u8>, Malformed> {
        let mut v = Vec::new();
        self.encode(&mut v)?;
        Ok(v)
    }

    /// The type byte this message carries.
    pub fn msg_type(&self) -> u8 {
        match self {
            CtrlMsg::RepAck(_) => ty::REP_ACK,
            CtrlMsg::Nack(_) => ty::NACK,
            CtrlMsg::NackTooOld(_) => ty::NACK_TOO_OLD,
            CtrlMsg::RepairReq(_) => ty::REPAIR_REQ,
            CtrlMsg::DataFetch(m) => m.msg_type(),
            CtrlMsg::HashListReq(_) => ty::HASH_LIST_REQ,
            CtrlMsg::HashList(_) => ty::HASH_LIST,
            CtrlMsg::TailReport(_) => ty::TAIL_REPORT,
            CtrlMsg::Silence(_) => ty::SILENCE,
            CtrlMsg::TailConflict(_) => ty::TAIL_CONFLICT,
            CtrlMsg::SeqEquivocation(_) => ty::SEQ_EQUIVOCATION,
            CtrlMsg::RepDurableMark(_) => ty::REP_DURABLE_MARK,
            CtrlMsg::DataBadMac(_) => ty::DATA_BAD_MAC,
            CtrlMsg::CopyConflict(_) => ty::COPY_CONFLICT,
            CtrlMsg::DataDown(_) => ty::DATA_DOWN,
            CtrlMsg::DataRedirect(_) => ty::DATA_REDIRECT,
            CtrlMsg::SeqChange(_) => ty::SEQ_CHANGE,
            CtrlMsg::RepMembership(_) => ty::REP_MEMBERSHIP,
            CtrlMsg::FinalityCert(_) => ty::FINALITY_CERT,
            CtrlMsg::FinalizeVote(_) => ty::FINALIZE_VOTE,
            CtrlMsg::Diverge(_) => ty::DIVERGE,
            CtrlMsg::PeerDataFetch(_) => ty::PEER_DATA_FETCH,
            CtrlMsg::PeerData(_) => ty::PEER_DATA,
            CtrlMsg::SeqDataReq(_) => ty::SEQ_DATA_REQ,
            CtrlMsg::SeqData(_) => ty::SEQ_DATA,
            CtrlMsg::SealOffer(_) => ty::SEAL_OFFER,
            CtrlMsg::SealCert(_) => ty::SEAL_CERT,
        }
    }
}
