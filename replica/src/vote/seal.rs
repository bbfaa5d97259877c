//! The replica's ledger answers for the seal (07 §9.4): the leader's seal from its own decoder
//! and data side once the wait of §9.2 is over, and a voter's check of the leader's seal against
//! what it holds.

use super::CoreLedger;
use crate::front::core::ReplicaOut;
use crate::front::data::UnavailRefused;
use crate::front::failover::seal::{
    check_seal, seal_header, seal_proposal, SealRefused, SignedTip,
};
use vyrn_consensus::{Check, Ledger as _, SealAsk};
use vyrn_wire::header::BlockHeader;
use vyrn_wire::msg::consensus::{RepProposal, RepSealExt};
use vyrn_wire::msg::ctrl::SEAL_MSG_UNAVAIL_MAX;
use vyrn_wire::msg::PktKey;

/// Where this voter's seal stands, as the node logs it on each change (07 §9.4): why a leader
/// proposes nothing yet, or why a voter's check is pending or false.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SealWhy {
    /// No seal plan yet (the wait of §9.2 is not over here).
    NoPlan,
    /// The decoder does not hold the prefix's start (`BlockMark(H*)`) or its tail.
    NoTail,
    /// `header_hash(H*)` is not held.
    NoTipHash,
    /// A record of the tail is not resolved (its payload not joined yet).
    Data,
    /// The seal does not hold here.
    Refused(SealRefused),
    /// The signed range `first ..= H*` is not checked true.
    SignedRange(Check),
    /// This leader proposed its seal.
    Proposed,
    /// This voter checked the leader's seal true.
    Checked,
    /// This leader proposed the seal again on itself: its view ended notarized with too few
    /// finalize votes (`Desk::seal_repropose`).
    Reproposed,
    /// This voter refused a seal that lists a packet it can resolve (07 §9.3 item 4): the node
    /// sends its copy to its peers, the leader among them, whose next proposal includes it.
    Held(PktKey),
}

impl<O: ReplicaOut> CoreLedger<'_, O> {
    /// This replica's seal header, from `H*`'s header hash and its tail after `BlockMark(H*)`
    /// (or why not: it does not hold the prefix's start, or a record of the tail is unresolved).
    fn own_seal(
        &self,
        unavail: &[PktKey],
    ) -> Result<(BlockHeader, vyrn_wire::decoder::OpenBlock, SignedTip), SealWhy> {
        let plan = self.seal.ok_or(SealWhy::NoPlan)?;
        let (ob, dr) = self
            .core
            .seal_block(plan.h_star, unavail)
            .ok_or(SealWhy::NoTail)?;
        let tip = SignedTip {
            height: plan.h_star,
            hash: *self.hashes.get(&plan.h_star).ok_or(SealWhy::NoTipHash)?,
            // BlockMark(H*)'s last step, as the decoder took it (and checked it against H*'s
            // header).
            last_step: ob.first_step.checked_sub(1).ok_or(SealWhy::NoTail)?,
        };
        let hdr = seal_header(plan.epoch, plan.book, &tip, &ob, dr.ok_or(SealWhy::Data)?)
            .map_err(SealWhy::Refused)?;
        Ok((hdr, ob, tip))
    }

    /// Note why the seal waits or was refused here (the node logs each change).
    fn note(&mut self, why: SealWhy) {
        if *self.seal_why != Some(why) {
            *self.seal_why = Some(why);
            *self.seal_why_new = true;
        }
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
        // 07 §9.3 item 4: the tail's records this leader still cannot resolve
        // REP_SEAL_DATA_WAIT_MS after their frame are listed unavailable.
        let unavail = match self.core.seal_unavail(plan.h_star, now) {
            Ok(l) if l.len() <= SEAL_MSG_UNAVAIL_MAX => l,
            Ok(_) => {
                self.note(SealWhy::Refused(SealRefused::Unavail));
                return SealAsk::Wait;
            }
            Err(0) => {
                self.note(SealWhy::NoTail);
                return SealAsk::Wait;
            }
            Err(_) => {
                self.note(SealWhy::Data);
                return SealAsk::Wait;
            }
        };
        let (hdr, ob, tip) = match self.own_seal(&unavail) {
            Ok(s) => s,
            Err(why) => {
                self.note(why);
                return SealAsk::Wait;
            }
        };
        let mut ext = plan.ext.clone();
        ext.unavail = unavail;
        let p = match seal_proposal(parent_last, &hdr, &ob, &ext) {
            Ok(p) => p,
            Err(e) => {
                self.note(SealWhy::Refused(e));
                return SealAsk::Wait;
            }
        };
        let c = self.signed_range(p.first_height, &tip, now);
        if c != Check::True {
            self.note(SealWhy::SignedRange(c));
            return SealAsk::Wait;
        }
        self.note(SealWhy::Proposed);
        // Its listed packets wait for the seal: replay must not run one the final log excludes.
        self.core.hold_for_seal(&ext.unavail);
        SealAsk::Ready(Box::new((p, ext)))
    }

    pub(super) fn seal_check(&mut self, p: &RepProposal, ext: &RepSealExt, now: u64) -> Check {
        let pending = Check::Pending { at: p.last_height };
        // Not deposed here yet, or the prefix's start not held: pending (then false at
        // REP_VERIFY_WAIT_MS).
        let Some(plan) = self.seal else {
            return pending;
        };
        // 07 §9.3 item 4: a listed packet this voter can resolve is refused (the leader fetches
        // it, and its next proposal includes it); a listed key of no record of the tail is a
        // malformed seal.
        match self.core.check_unavail(plan.h_star, &ext.unavail) {
            Ok(()) => {}
            Err(UnavailRefused::NoTail) => {
                self.note(SealWhy::NoTail);
                return pending;
            }
            Err(e @ (UnavailRefused::Held(_) | UnavailRefused::NotInTail(_))) => {
                self.note(match e {
                    UnavailRefused::Held(k) => SealWhy::Held(k),
                    _ => SealWhy::Refused(SealRefused::Unavail),
                });
                self.counters.refused += 1;
                return Check::False {
                    at: p.last_height,
                    contradiction: true,
                };
            }
        }
        let (hdr, ob, tip) = match self.own_seal(&ext.unavail) {
            Ok(s) => s,
            Err(why) => {
                self.note(why);
                return pending;
            }
        };
        let next = (plan.ext.next_seq, plan.ext.next_tenure);
        match check_seal(p, ext, plan.epoch, &hdr, &ob, next) {
            Ok(()) => {
                let c = self.signed_range(p.first_height, &tip, now);
                self.note(match c {
                    Check::True => SealWhy::Checked,
                    c => SealWhy::SignedRange(c),
                });
                if c == Check::True {
                    // Its listed packets wait for the seal (`hold_for_seal`).
                    self.core.hold_for_seal(&ext.unavail);
                }
                c
            }
            // Short of the leader's F*: fetched from the peers (07 §9.3), and this voter waits.
            // Past it (frames the leader's wait did not see): it waits too.
            Err(e @ SealRefused::Frames { have, want }) => {
                self.note(SealWhy::Refused(e));
                if have[0] < want[0] || have[1] < want[1] {
                    self.core.seal_fetch(want, &[], now, self.out);
                }
                pending
            }
            Err(e) => {
                self.note(SealWhy::Refused(e));
                self.counters.refused += 1;
                Check::False {
                    at: p.last_height,
                    contradiction: true,
                }
            }
        }
    }
}
