//! The interim finality voter: signs a range's proposal digest once the verdict says `True`.

use super::*;
use crate::front::verdict::{Pending, Refusal, VerifyOutcome};
use vyrn_wire::consts::REP_MAX_HDRS_PER_PROPOSAL;
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
        let mut last = None;
        for (&h, hash) in self.hashes.range(self.next..) {
            if h != last.map_or(self.next, |(l, _)| l + 1)
                || h - self.next >= REP_MAX_HDRS_PER_PROPOSAL
            {
                break;
            }
            last = Some((h, *hash));
        }
        let Some((mut last_h, mut last_hash)) = last else {
            return;
        };
        // INV-REP-4: vote only on what the verdict says is held and checked.
        let first = core.verify(self.next, last_h, &last_hash, now, out);
        self.pending = match first {
            VerifyOutcome::Pending(h, p) => Some((h, p)),
            _ => None,
        };
        match first {
            VerifyOutcome::True => {}
            VerifyOutcome::Pending(h, _) if h > self.next => {
                // The blocks below the pending one are complete: vote them now.
                last_h = h - 1;
                let Some(x) = self.hashes.get(&last_h) else {
                    return;
                };
                last_hash = *x;
                if core.verify(self.next, last_h, &last_hash, now, out) != VerifyOutcome::True {
                    return;
                }
            }
            VerifyOutcome::Pending(..) => return,
            // A contradiction: never (INV-REP-4).
            VerifyOutcome::False(h, Some(r)) => {
                self.refused = Some((h, r));
                return;
            }
            // Pending past REP_VERIFY_WAIT_MS: this ask is false; the next asks afresh.
            VerifyOutcome::False(_, None) => {
                self.timeouts += 1;
                return;
            }
        }
        // One proposal per height (view h + 1 on parent view h): every honest interim voter
        // signs the same proposals, so Q of them make the listener's quorum (07 §6.8).
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
