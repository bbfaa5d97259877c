//! The interim finality voter: signs a range's proposal digest once the verdict says `True`.

use super::*;
use crate::front::verdict::{Pending, Refusal};
use vyrn_wire::msg::consensus::{ProposalKind, RepProposal};
use vyrn_wire::msg::ctrl::FinalizeVote;

/// The interim finality voter (until the consensus issue: see the module docs).
#[derive(Debug)]
pub struct InterimVoter {
    /// Its finalize signer (Simplex's ed25519 signature, what the box's finality listener
    /// checks), None if its key is not in the home's voters.
    pub(super) signer: Option<vyrn_consensus::FinalizeSigner>,
    pub(super) index: u8,
    pub(super) epoch: u32,
    /// First height not yet voted.
    pub(super) next: u64,
    /// Header hashes of held headers not yet voted, by height.
    pub(super) hashes: std::collections::BTreeMap<u64, Hash>,
    /// The first height the verdict refused, and why: nothing at or after it is ever voted.
    pub(super) refused: Option<(u64, Refusal)>,
    /// The replica stopped this voter's votes (its journal failed): nothing more is signed.
    pub(super) stopped: bool,
    /// What the last ask was pending on (height, reason).
    pub pending: Option<(u64, Pending)>,
    /// Asks that timed out (REP_VERIFY_WAIT_MS pending): asked again, as a new view would.
    pub timeouts: u64,
    /// Votes sent, and the heights they covered.
    pub votes: u64,
    /// Highest height voted.
    pub voted: u64,
}

impl InterimVoter {
    /// A voter with `key` at `index` of the membership `voters`, voting from `first_height`.
    pub fn new(
        key: &SigningKey,
        voters: Option<&vyrn_consensus::Voters>,
        index: u8,
        epoch: u32,
        first_height: u64,
    ) -> Self {
        InterimVoter {
            signer: voters.and_then(|v| vyrn_consensus::FinalizeSigner::new(v, &key.to_bytes())),
            index,
            epoch,
            next: first_height,
            hashes: Default::default(),
            refused: None,
            stopped: false,
            pending: None,
            timeouts: 0,
            votes: 0,
            voted: first_height.saturating_sub(1),
        }
    }

    /// A header the replica holds, by height and `header_hash` (signature and chain are the
    /// verdict's to check).
    pub fn on_header(&mut self, height: u64, hash: Hash) {
        if height >= self.next && self.hashes.len() < 1 << 16 {
            self.hashes.insert(height, hash);
        }
    }

    /// The height the verdict refused and why, if any.
    pub fn refused(&self) -> Option<(u64, Refusal)> {
        self.refused
    }

    /// Ask the verdict for the longest contiguous held range from the next height; on `True`,
    /// the signed vote's bytes to `send`. Pending asks again next time.
    pub fn tick(
        &mut self,
        core: &mut ReplicaCore,
        now: u64,
        out: &mut impl ReplicaOut,
        mut send: impl FnMut(&[u8]),
    ) {
        if self.refused.is_some() || self.stopped {
            return;
        }
        // INV-REP-4: vote only on what the verdict says is held and checked.
        let (last_h, _) = match super::follow::verify_run(core, &self.hashes, self.next, now, out) {
            super::follow::Run::Through(h, hash) => {
                self.pending = None;
                (h, hash)
            }
            super::follow::Run::Wait(p) => {
                self.pending = p;
                return;
            }
            super::follow::Run::Refused(h, r) => {
                self.pending = None;
                self.refused = Some((h, r));
                return;
            }
            super::follow::Run::TimedOut => {
                self.pending = None;
                self.timeouts += 1;
                return;
            }
        };
        let Some(signer) = &self.signer else {
            return;
        };
        for h in self.next..=last_h {
            let Some(hash) = self.hashes.get(&h) else {
                break;
            };
            let proposal = RepProposal {
                kind: ProposalKind::Headers,
                epoch: self.epoch,
                first_height: h,
                last_height: h,
                last_hash: *hash,
                excl_root: [0; 32],
            };
            let v = FinalizeVote {
                epoch: self.epoch,
                view: h + 1,
                parent_view: h,
                proposal,
                index: self.index,
                sig: signer.sign(self.epoch, h + 1, h, &proposal),
            };
            let mut b = Vec::with_capacity(176);
            if v.encode(&mut b).is_ok() {
                send(&b);
                self.votes += 1;
            }
        }
        self.voted = last_h;
        self.next = last_h + 1;
        self.hashes = self.hashes.split_off(&self.next);
    }
}
