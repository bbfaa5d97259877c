//! `FinalizeVote` (0x15): one voter's Simplex finalize vote to the sequencer's control port
//! (07 §6.8).

use super::{ty, Body, CertEntry, Malformed, Reader, RepFinalityCert, MAX_MEMBERS};
use crate::msg::{finish, put_u32, put_u64};

/// One voter's Simplex finalize vote (07 §6.8: "every voter sends its finalize vote to the
/// sequencer's REP_UDP_CTRL"): everything a `REP_FinalityCert` entry needs, so the sequencer's
/// finality listener checks it as a certificate of one entry. `sig` is the voter's Simplex
/// finalize signature over `Proposal { round: (epoch, view), parent: parent_view, payload:
/// proposal.digest() }` under namespace `b"vyrn-v1"` (07 §6.5; `vyrn-consensus` signs and checks
/// it). Bytes (`docs/wire-messages.md`): type byte, epoch u32, view u64, parent_view u64, the 85
/// proposal bytes, the voter index, the signature.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FinalizeVote {
    /// Epoch; equals `proposal.epoch`.
    pub epoch: u32,
    /// The Simplex view of the proposal.
    pub view: u64,
    /// Its parent's view (< `view`).
    pub parent_view: u64,
    /// The proposal voted for.
    pub proposal: crate::msg::consensus::RepProposal,
    /// Voter index (position in `REP_Membership.voters`).
    pub index: u8,
    /// The voter's Simplex finalize signature.
    pub sig: [u8; 64],
}

impl Body for FinalizeVote {
    fn check(&self) -> Result<(), Malformed> {
        if self.epoch != self.proposal.epoch
            || (self.index as usize) >= MAX_MEMBERS
            || self.view <= self.parent_view
        {
            return Err(Malformed::BadValue);
        }
        Ok(())
    }
    fn write_body(&self, out: &mut Vec<u8>) {
        put_u32(out, self.epoch);
        put_u64(out, self.view);
        put_u64(out, self.parent_view);
        self.proposal.encode(out);
        out.push(self.index);
        out.extend_from_slice(&self.sig);
    }
    fn read_body(r: &mut Reader<'_>) -> Result<Self, Malformed> {
        let epoch = r.u32_le()?;
        let view = r.u64_le()?;
        let parent_view = r.u64_le()?;
        let proposal = crate::msg::consensus::RepProposal::parse(
            r.bytes(crate::msg::consensus::RepProposal::LEN)?,
        )?;
        Ok(FinalizeVote {
            epoch,
            view,
            parent_view,
            proposal,
            index: r.u8()?,
            sig: r.array()?,
        })
    }
}
ctrl_codec!(FinalizeVote, ty::FINALIZE_VOTE);

impl FinalizeVote {
    /// The vote as the one entry of a certificate (what the finality listener checks).
    pub fn as_cert(&self) -> RepFinalityCert {
        RepFinalityCert {
            epoch: self.epoch,
            view: self.view,
            parent_view: self.parent_view,
            proposal: self.proposal,
            entries: vec![CertEntry {
                index: self.index,
                sig: self.sig,
            }],
        }
    }
}
