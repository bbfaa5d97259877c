//! The replica's ledger answers for the seal (07 §9.4): the leader's seal from its own decoder
//! and data side once the wait of §9.2 is over, and a voter's check of the leader's seal against
//! what it holds.

use super::CoreLedger;
use crate::front::core::ReplicaOut;
use crate::front::failover::seal::{
    check_seal, seal_header, seal_proposal, SealRefused, SignedTip,
};
use vyrn_consensus::{Check, Ledger as _, SealAsk};
use vyrn_wire::header::BlockHeader;
use vyrn_wire::msg::consensus::{RepProposal, RepSealExt};

impl<O: ReplicaOut> CoreLedger<'_, O> {
    /// This replica's seal header, from `H*`'s header hash and its tail after `BlockMark(H*)`
    /// (None: it does not hold the prefix's start, or a record of the tail is unresolved).
    fn own_seal(&self) -> Option<(BlockHeader, vyrn_wire::decoder::OpenBlock, SignedTip)> {
        let plan = self.seal?;
        let (ob, dr) = self.core.seal_block(plan.h_star)?;
        let tip = SignedTip {
            height: plan.h_star,
            hash: *self.hashes.get(&plan.h_star)?,
            // BlockMark(H*)'s last step, as the decoder took it (and checked it against H*'s
            // header).
            last_step: ob.first_step.checked_sub(1)?,
        };
        let hdr = seal_header(plan.epoch, plan.book, &tip, &ob, dr?).ok()?;
        Some((hdr, ob, tip))
    }

    /// The signed range `first ..= H*` checked as any proposal's (07 §6.4 items 1, 3, 4).
    fn signed_range(&mut self, first: u64, tip: &SignedTip, now: u64) -> Check {
        if first > tip.height {
            return Check::True;
        }
        self.check(first, tip.height, &tip.hash, now)
    }

    pub(super) fn seal_ask(&mut self, parent_last: u64, now: u64) -> SealAsk {
        let Some(plan) = self.seal else {
            return SealAsk::No;
        };
        let Some((hdr, ob, tip)) = self.own_seal() else {
            return SealAsk::Wait;
        };
        let Ok(p) = seal_proposal(parent_last, &hdr, &ob, &plan.ext) else {
            return SealAsk::Wait;
        };
        if self.signed_range(p.first_height, &tip, now) != Check::True {
            return SealAsk::Wait;
        }
        SealAsk::Ready(Box::new((p, plan.ext.clone())))
    }

    pub(super) fn seal_check(&mut self, p: &RepProposal, ext: &RepSealExt, now: u64) -> Check {
        let pending = Check::Pending { at: p.last_height };
        // Not deposed here yet, or the prefix's start not held: pending (then false at
        // REP_VERIFY_WAIT_MS).
        let Some(plan) = self.seal else {
            return pending;
        };
        let Some((hdr, ob, tip)) = self.own_seal() else {
            return pending;
        };
        let next = (plan.ext.next_seq, plan.ext.next_tenure);
        match check_seal(p, ext, plan.epoch, &hdr, &ob, next) {
            Ok(()) => self.signed_range(p.first_height, &tip, now),
            // Short of the leader's F*: fetched from the peers (07 §9.3), and this voter waits.
            // Past it (frames the leader's wait did not see): it waits too.
            Err(SealRefused::Frames { have, want }) => {
                if have[0] < want[0] || have[1] < want[1] {
                    self.core.seal_fetch(want, &[], now, self.out);
                }
                pending
            }
            Err(_) => {
                self.counters.refused += 1;
                Check::False {
                    at: p.last_height,
                    contradiction: true,
                }
            }
        }
    }
}
