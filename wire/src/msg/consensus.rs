//! Consensus payloads and certificates: `REP_Proposal` (07 §6.3), `REP_SealExt` (§9.4),
//! `REP_FinalityCert` (§6.5), `REP_RootCert` and the state-root vote digest (§7.4).
//!
//! Certificates are parsed and re-encoded here; checking their signatures against a membership
//! is `vyrn-consensus::verify_finality_cert`'s job (07 §6.5), not this crate's.

use crate::consts::{domain, REP_MAX_HDRS_PER_PROPOSAL, REP_MAX_SEAL_RANGE};
use crate::error::Malformed;
use crate::header::Hash;
use crate::leb::Reader;
use crate::msg::{finish, keys_ascending, put_u32, put_u64, read_keys, PktKey};
use crate::msg::{MAX_MEMBERS, MAX_UNAVAIL, Q_BASE};

/// `REP_Proposal` length: 1 + 4 + 8 + 8 + 32 + 32 (07 §6.3).
pub const PROPOSAL_BYTES: usize = 85;
/// One certificate entry: index u8, `sig [u8; 64]` (07 §6.5).
pub const CERT_ENTRY_BYTES: usize = 65;
/// Fixed part of `REP_FinalityCert` before the entries (07 §6.5).
pub const FINALITY_CERT_FIXED_BYTES: usize = 106;
/// Fixed part of `REP_RootCert` before the entries (07 §7.4).
pub const ROOT_CERT_FIXED_BYTES: usize = 61;
/// Fixed part of `REP_SealExt` before the unavailable list (07 §9.4).
pub const SEAL_EXT_FIXED_BYTES: usize = 22;
/// `REP_SealExt.next_seq` when no box is promotable (07 §9.5).
pub const NEXT_SEQ_NONE: u8 = 0xFF;

/// `REP_Proposal.kind` (07 §6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ProposalKind {
    /// A range of sequencer-signed headers.
    Headers = 0,
    /// A seal proposal (07 §9.4).
    Seal = 1,
}

impl ProposalKind {
    /// From the wire byte.
    pub fn from_u8(b: u8) -> Option<Self> {
        match b {
            0 => Some(ProposalKind::Headers),
            1 => Some(ProposalKind::Seal),
            _ => None,
        }
    }
}

/// `REP_Proposal`: the Simplex payload, 85 bytes (07 §6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RepProposal {
    /// Headers or Seal.
    pub kind: ProposalKind,
    /// Epoch.
    pub epoch: u32,
    /// The parent proposal's `last_height + 1`.
    pub first_height: u64,
    /// Last height of the range.
    pub last_height: u64,
    /// `header_hash(last_height)`.
    pub last_hash: Hash,
    /// BASE: 32 zero bytes; CHAIN: 09's root over the excluded `(session, pkt_seq)`.
    pub excl_root: Hash,
}

impl RepProposal {
    /// Encoded length.
    pub const LEN: usize = PROPOSAL_BYTES;

    /// The 85 wire bytes.
    pub fn to_bytes(&self) -> [u8; PROPOSAL_BYTES] {
        let mut b = [0u8; PROPOSAL_BYTES];
        b[0] = self.kind as u8;
        b[1..5].copy_from_slice(&self.epoch.to_le_bytes());
        b[5..13].copy_from_slice(&self.first_height.to_le_bytes());
        b[13..21].copy_from_slice(&self.last_height.to_le_bytes());
        b[21..53].copy_from_slice(&self.last_hash);
        b[53..85].copy_from_slice(&self.excl_root);
        b
    }

    /// Append the 85 wire bytes.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_bytes());
    }

    /// Parse exactly 85 bytes and [`validate`](Self::validate) the range with the default caps.
    pub fn parse(b: &[u8]) -> Result<Self, Malformed> {
        Self::parse_with(b, REP_MAX_HDRS_PER_PROPOSAL, REP_MAX_SEAL_RANGE)
    }

    /// Parse with configured caps (both are budgets, 07 "Local definitions").
    pub fn parse_with(b: &[u8], max_hdrs: u64, max_seal_range: u64) -> Result<Self, Malformed> {
        if b.len() != PROPOSAL_BYTES {
            return Err(if b.len() < PROPOSAL_BYTES {
                Malformed::Truncated
            } else {
                Malformed::BadLength
            });
        }
        let mut r = Reader::new(b);
        let p = Self::read(&mut r)?;
        p.validate_with(max_hdrs, max_seal_range)?;
        Ok(p)
    }

    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Self, Malformed> {
        Ok(RepProposal {
            kind: ProposalKind::from_u8(r.u8()?).ok_or(Malformed::BadKind)?,
            epoch: r.u32_le()?,
            first_height: r.u64_le()?,
            last_height: r.u64_le()?,
            last_hash: r.array()?,
            excl_root: r.array()?,
        })
    }

    /// The range rule with the default caps: `last_height ≥ first_height`, and
    /// `last_height − first_height < REP_MAX_HDRS_PER_PROPOSAL` (Headers, 07 §6.3) or
    /// `< REP_MAX_SEAL_RANGE` (Seal, 07 §9.4).
    pub fn validate(&self) -> Result<(), Malformed> {
        self.validate_with(REP_MAX_HDRS_PER_PROPOSAL, REP_MAX_SEAL_RANGE)
    }

    /// The range rule with configured caps. A reversed range is `BadValue`, a long one `TooMany`.
    pub fn validate_with(&self, max_hdrs: u64, max_seal_range: u64) -> Result<(), Malformed> {
        let span = self
            .last_height
            .checked_sub(self.first_height)
            .ok_or(Malformed::BadValue)?;
        let cap = match self.kind {
            ProposalKind::Headers => max_hdrs,
            ProposalKind::Seal => max_seal_range,
        };
        if span >= cap {
            return Err(Malformed::TooMany);
        }
        Ok(())
    }

    /// `digest = BLAKE3("vyrn v1 proposal" ‖ REP_Proposal bytes)` (07 §6.3).
    pub fn digest(&self) -> Hash {
        let mut h = blake3::Hasher::new();
        h.update(domain::PROPOSAL);
        h.update(&self.to_bytes());
        *h.finalize().as_bytes()
    }
}

/// `REP_SealExt`: the seal proposal's extension (07 §9.4). `n_unavail` is `unavail.len()`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct RepSealExt {
    /// `[F*_A, F*_B]`: the last frame of the prefix on each substream.
    pub end_frame_seq: [u64; 2],
    /// Sequencer index of the next sequencer, or [`NEXT_SEQ_NONE`] (07 §9.5).
    pub next_seq: u8,
    /// Tenure the next sequencer starts.
    pub next_tenure: u8,
    /// Unavailable packets, strictly ascending by `(session, pkt_seq)` (project canonical order,
    /// so every voter hashes identical bytes); at most [`MAX_UNAVAIL`].
    pub unavail: Vec<PktKey>,
}

impl RepSealExt {
    /// Encoded length.
    pub fn encoded_len(&self) -> usize {
        SEAL_EXT_FIXED_BYTES + PktKey::LEN * self.unavail.len()
    }

    /// Append the wire bytes. Fails (`TooMany`, `BadValue`) where `parse` would.
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), Malformed> {
        if self.unavail.len() > MAX_UNAVAIL {
            return Err(Malformed::TooMany);
        }
        if !keys_ascending(&self.unavail) {
            return Err(Malformed::BadValue);
        }
        put_u64(out, self.end_frame_seq[0]);
        put_u64(out, self.end_frame_seq[1]);
        out.push(self.next_seq);
        out.push(self.next_tenure);
        put_u32(out, self.unavail.len() as u32);
        for k in &self.unavail {
            k.encode(out);
        }
        Ok(())
    }

    /// The wire bytes.
    pub fn to_bytes(&self) -> Result<Vec<u8>, Malformed> {
        let mut v = Vec::with_capacity(self.encoded_len());
        self.encode(&mut v)?;
        Ok(v)
    }

    /// Parse a whole seal extension.
    pub fn parse(b: &[u8]) -> Result<Self, Malformed> {
        let mut r = Reader::new(b);
        let ext = Self::read(&mut r)?;
        finish(&r)?;
        Ok(ext)
    }

    /// Read one seal extension (its count bounds what follows).
    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Self, Malformed> {
        let end_frame_seq = [r.u64_le()?, r.u64_le()?];
        let next_seq = r.u8()?;
        let next_tenure = r.u8()?;
        let n = r.u32_le()? as usize;
        let unavail = read_keys(r, n)?;
        Ok(RepSealExt {
            end_frame_seq,
            next_seq,
            next_tenure,
            unavail,
        })
    }

    /// The seal's Simplex payload: `BLAKE3(proposal bytes ‖ seal ext bytes)` (07 §9.4; no domain
    /// string, as written there).
    pub fn digest(&self, proposal: &RepProposal) -> Result<Hash, Malformed> {
        let mut h = blake3::Hasher::new();
        h.update(&proposal.to_bytes());
        h.update(&self.to_bytes()?);
        Ok(*h.finalize().as_bytes())
    }
}

/// `seal digest = BLAKE3(REP_Proposal bytes ‖ REP_SealExt bytes)` (07 §9.4).
pub fn seal_digest(proposal: &RepProposal, ext: &RepSealExt) -> Result<Hash, Malformed> {
    ext.digest(proposal)
}

/// One certificate signature: voter index and Ed25519 signature (07 §6.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CertEntry {
    /// Voter index (position in `REP_Membership.voters`).
    pub index: u8,
    /// Ed25519 signature.
    pub sig: [u8; 64],
}

/// Read `count u8` then the entries: `Q_BASE..=MAX_MEMBERS` of them, strictly ascending index.
pub(crate) fn read_entries(r: &mut Reader<'_>) -> Result<Vec<CertEntry>, Malformed> {
    read_entries_bounded(r, Q_BASE as usize)
}

/// As [`read_entries`] with a given minimum count.
pub(crate) fn read_entries_bounded(
    r: &mut Reader<'_>,
    min: usize,
) -> Result<Vec<CertEntry>, Malformed> {
    let n = r.u8()? as usize;
    if n > MAX_MEMBERS {
        return Err(Malformed::TooMany);
    }
    if n < min {
        return Err(Malformed::BadValue);
    }
    if n * CERT_ENTRY_BYTES > r.remaining() {
        return Err(Malformed::Truncated);
    }
    let mut v: Vec<CertEntry> = Vec::with_capacity(n);
    for _ in 0..n {
        let e = CertEntry {
            index: r.u8()?,
            sig: r.array()?,
        };
        if v.last().is_some_and(|p| p.index >= e.index) {
            return Err(Malformed::BadValue);
        }
        v.push(e);
    }
    Ok(v)
}

/// The rules [`read_entries_bounded`] applies: count in `min..=MAX_MEMBERS`, ascending index.
pub(crate) fn check_entries(entries: &[CertEntry], min: usize) -> Result<(), Malformed> {
    if entries.len() > MAX_MEMBERS {
        return Err(Malformed::TooMany);
    }
    if entries.len() < min || !entries.windows(2).all(|w| w[0].index < w[1].index) {
        return Err(Malformed::BadValue);
    }
    Ok(())
}

/// Check entries as [`read_entries_bounded`] would, then append `count u8` and the entries.
pub(crate) fn write_entries(
    out: &mut Vec<u8>,
    entries: &[CertEntry],
    min: usize,
) -> Result<(), Malformed> {
    check_entries(entries, min)?;
    out.push(entries.len() as u8);
    for e in entries {
        out.push(e.index);
        out.extend_from_slice(&e.sig);
    }
    Ok(())
}

/// `REP_FinalityCert` (07 §6.5): 106 + 65·count bytes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RepFinalityCert {
    /// Epoch; equals `proposal.epoch`.
    pub epoch: u32,
    /// Simplex view of the finalization.
    pub view: u64,
    /// View of the parent proposal; below `view`.
    pub parent_view: u64,
    /// The finalized proposal.
    pub proposal: RepProposal,
    /// `Q_BASE..=MAX_MEMBERS` finalize signatures, strictly ascending index (07 §6.5, 01 §4).
    pub entries: Vec<CertEntry>,
}

impl RepFinalityCert {
    /// Encoded length.
    pub fn encoded_len(&self) -> usize {
        FINALITY_CERT_FIXED_BYTES + CERT_ENTRY_BYTES * self.entries.len()
    }

    /// Append the wire bytes; fails, writing nothing, where `parse` would.
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), Malformed> {
        self.check()?;
        check_entries(&self.entries, Q_BASE as usize)?;
        put_u32(out, self.epoch);
        put_u64(out, self.view);
        put_u64(out, self.parent_view);
        self.proposal.encode(out);
        write_entries(out, &self.entries, Q_BASE as usize)
    }

    /// The wire bytes.
    pub fn to_bytes(&self) -> Result<Vec<u8>, Malformed> {
        let mut v = Vec::with_capacity(self.encoded_len());
        self.encode(&mut v)?;
        Ok(v)
    }

    fn check(&self) -> Result<(), Malformed> {
        self.proposal.validate()?;
        if self.epoch != self.proposal.epoch || self.parent_view >= self.view {
            return Err(Malformed::BadValue);
        }
        Ok(())
    }

    /// Whether [`Self::encode`] would write it (what it checks, without the bytes).
    pub fn validate(&self) -> Result<(), Malformed> {
        self.check()?;
        check_entries(&self.entries, Q_BASE as usize)
    }

    /// Parse a whole certificate: layout, proposal range, epoch match, `parent_view < view`,
    /// entry count and order. Signatures are not checked here.
    pub fn parse(b: &[u8]) -> Result<Self, Malformed> {
        let mut r = Reader::new(b);
        let epoch = r.u32_le()?;
        let view = r.u64_le()?;
        let parent_view = r.u64_le()?;
        let proposal = RepProposal::read(&mut r)?;
        let entries = read_entries(&mut r)?;
        finish(&r)?;
        let c = RepFinalityCert {
            epoch,
            view,
            parent_view,
            proposal,
            entries,
        };
        c.check()?;
        Ok(c)
    }
}

/// `REP_RootCert` (07 §7.4): the `REP_FinalityCert` layout with the proposal replaced by
/// `(h u64, R(h) [32])`; 61 + 65·count bytes. `aggregation` has no views: v1 writers put 0 in
/// `view` and `parent_view`, and parsers accept any value.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RepRootCert {
    /// Epoch.
    pub epoch: u32,
    /// As in `REP_FinalityCert` (0 in v1).
    pub view: u64,
    /// As in `REP_FinalityCert` (0 in v1).
    pub parent_view: u64,
    /// Root height h, `(h + 1) % REP_ROOT_BLOCKS == 0`.
    pub h: u64,
    /// `R(h)`.
    pub root: Hash,
    /// Root-vote signatures over [`root_vote_digest`], strictly ascending index.
    pub entries: Vec<CertEntry>,
}

impl RepRootCert {
    /// Encoded length.
    pub fn encoded_len(&self) -> usize {
        ROOT_CERT_FIXED_BYTES + CERT_ENTRY_BYTES * self.entries.len()
    }

    /// Append the wire bytes; fails, writing nothing, where `parse` would.
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), Malformed> {
        check_entries(&self.entries, Q_BASE as usize)?;
        put_u32(out, self.epoch);
        put_u64(out, self.view);
        put_u64(out, self.parent_view);
        put_u64(out, self.h);
        out.extend_from_slice(&self.root);
        write_entries(out, &self.entries, Q_BASE as usize)
    }

    /// The wire bytes.
    pub fn to_bytes(&self) -> Result<Vec<u8>, Malformed> {
        let mut v = Vec::with_capacity(self.encoded_len());
        self.encode(&mut v)?;
        Ok(v)
    }

    /// Parse a whole certificate (signatures are not checked here).
    pub fn parse(b: &[u8]) -> Result<Self, Malformed> {
        let mut r = Reader::new(b);
        let c = RepRootCert {
            epoch: r.u32_le()?,
            view: r.u64_le()?,
            parent_view: r.u64_le()?,
            h: r.u64_le()?,
            root: r.array()?,
            entries: read_entries(&mut r)?,
        };
        finish(&r)?;
        Ok(c)
    }

    /// The digest every entry signs.
    pub fn vote_digest(&self) -> Hash {
        root_vote_digest(self.epoch, self.h, &self.root)
    }
}

/// `digest = BLAKE3("vyrn v1 root" ‖ epoch u32 ‖ h u64 ‖ R(h))`, integers little-endian (07 §7.4).
pub fn root_vote_digest(epoch: u32, h: u64, root: &Hash) -> Hash {
    let mut x = blake3::Hasher::new();
    x.update(domain::ROOT);
    x.update(&epoch.to_le_bytes());
    x.update(&h.to_le_bytes());
    x.update(root);
    *x.finalize().as_bytes()
}

/// Whether `h` is a root height with `REP_ROOT_BLOCKS` = `root_blocks`: `(h + 1) % root_blocks
/// == 0` (07 §7.4).
pub fn is_root_height(h: u64, root_blocks: u64) -> bool {
    root_blocks != 0 && (h % root_blocks) == root_blocks - 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn msg_proposal_layout_offsets() {
        let p = RepProposal {
            kind: ProposalKind::Seal,
            epoch: 0x0403_0201,
            first_height: 10,
            last_height: 73,
            last_hash: [0xAA; 32],
            excl_root: [0xBB; 32],
        };
        let b = p.to_bytes();
        assert_eq!(b[0], 1);
        assert_eq!(&b[1..5], &[1, 2, 3, 4]);
        assert_eq!(b[5], 10);
        assert_eq!(b[13], 73);
        assert_eq!(b[21], 0xAA);
        assert_eq!(b[84], 0xBB);
        assert_eq!(RepProposal::parse(&b).unwrap(), p);
        assert!(is_root_height(999, 1000) && !is_root_height(1000, 1000));
    }
}
