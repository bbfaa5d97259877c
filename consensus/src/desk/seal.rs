//! The seal at the desk (07 §9.4): one Simplex proposal of kind 1 whose payload is
//! `BLAKE3(REP_Proposal ‖ REP_SealExt)`.
//!
//! A header range is found by every voter from the headers it holds (no relay). A seal is not:
//! its `F*`, its next sequencer and its unavailable list are the seal leader's computation over
//! the TailReports it holds (§9.3). So the seal travels beside Simplex: the leader's ledger
//! hands its seal to the desk ([`Ledger::seal`]), the desk proposes its digest and gives the
//! proposal and ext out ([`DeskOut::SealOffer`]) for the replica to send to every voter; each
//! voter's replica hands the offers it receives in ([`Desk::offer_seal`]), and `verify` of a
//! seal digest asks that voter's own ledger ([`Ledger::check_seal`]: it holds every frame of the
//! prefix, its own seal header hashes to `last_hash`, it names the right next sequencer). A
//! payload that names neither a held range nor an offer stays pending until REP_VERIFY_WAIT_MS,
//! as before — the offer may come after Simplex's proposal.
//!
//! Finalizing the seal finalizes its range; its certificate ([`DeskOut::SealCert`], checked by
//! [`crate::cert::verify_seal_with`] with the ext) stands in for the seal header's `seq_sig`.
//! A voter's finalize vote on a seal is not sent to the finality listeners: a vote names the
//! proposal only, and a listener could not check it without the ext. The certificate reaches
//! them instead.

use std::collections::{HashMap, VecDeque};

use vyrn_wire::msg::consensus::{ProposalKind, RepProposal, RepSealExt};

use super::{Check, Desk, DeskOut, Ledger, Range};
use crate::Digest;

/// Seal offers kept (each failover's leader offers one seal per try; a Byzantine voter's junk
/// offers push out the oldest, never grow the map).
pub const SEALS_KEPT: usize = 16;

/// What the ledger answers when the desk leads a view (07 §9.2: the next Simplex leader builds
/// the seal proposal).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum SealAsk {
    /// No failover here: propose headers as usual.
    #[default]
    No,
    /// The tenure is deposed but the seal is not ready (the wait of §9.2, fetches): propose
    /// nothing yet.
    Wait,
    /// Propose this seal.
    Ready(Box<(RepProposal, RepSealExt)>),
}

/// The seal offers a voter holds, by payload, oldest evicted first.
#[derive(Debug, Default)]
pub(super) struct Seals {
    by_digest: HashMap<[u8; 32], (RepProposal, RepSealExt)>,
    order: VecDeque<[u8; 32]>,
}

impl Seals {
    fn insert(&mut self, d: [u8; 32], p: RepProposal, ext: RepSealExt) -> bool {
        if self.by_digest.contains_key(&d) {
            return false;
        }
        self.by_digest.insert(d, (p, ext));
        self.order.push_back(d);
        while self.order.len() > SEALS_KEPT {
            if let Some(old) = self.order.pop_front() {
                self.by_digest.remove(&old);
            }
        }
        true
    }

    pub(super) fn get(&self, d: &[u8; 32]) -> Option<&(RepProposal, RepSealExt)> {
        self.by_digest.get(d)
    }

    /// The range a seal digest names.
    pub(super) fn range(&self, d: &[u8; 32]) -> Option<Range> {
        self.get(d).map(|(p, _)| Range {
            first: p.first_height,
            last: p.last_height,
            last_hash: p.last_hash,
        })
    }
}

/// Why a seal offer was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OfferRefused {
    /// Not a kind-1 proposal.
    Kind,
    /// Another epoch.
    Epoch,
    /// The range breaks 07 §9.4 (reversed, or past REP_MAX_SEAL_RANGE), or the ext does not
    /// encode.
    Malformed,
    /// Already held.
    Duplicate,
}

impl Desk {
    /// A seal offer from the seal leader (07 §9.4), for `verify` of its digest. Checked for
    /// form only; whether this voter agrees is its ledger's answer when Simplex asks.
    pub fn offer_seal(&mut self, p: RepProposal, ext: RepSealExt) -> Result<Digest, OfferRefused> {
        let r = self.offer_inner(p, ext);
        match r {
            Ok(_) => self.counters.seal_offers += 1,
            Err(OfferRefused::Duplicate) => {}
            Err(_) => self.counters.seal_offers_refused += 1,
        }
        r
    }

    fn offer_inner(&mut self, p: RepProposal, ext: RepSealExt) -> Result<Digest, OfferRefused> {
        if p.kind != ProposalKind::Seal {
            return Err(OfferRefused::Kind);
        }
        if p.epoch != self.cfg.epoch {
            return Err(OfferRefused::Epoch);
        }
        p.validate().map_err(|_| OfferRefused::Malformed)?;
        let d = crate::cert::seal_payload(&p, &ext).ok_or(OfferRefused::Malformed)?;
        if !self.seals.insert(d.0, p, ext) {
            return Err(OfferRefused::Duplicate);
        }
        Ok(d)
    }

    /// The leader's seal on `parent_last` (None: not sealing, fall back to headers; `Some(None)`:
    /// sealing but nothing to propose yet).
    pub(super) fn seal_propose(
        &mut self,
        parent_last: u64,
        now: u64,
        ledger: &mut impl Ledger,
    ) -> Option<Option<Digest>> {
        let (p, ext) = match ledger.seal(parent_last, now) {
            SealAsk::No => return None,
            SealAsk::Wait => return Some(None),
            SealAsk::Ready(b) => *b,
        };
        if p.first_height != parent_last + 1 {
            // The ledger built it on another parent: not this view's.
            return Some(None);
        }
        let Ok(d) = self.offer_inner(p, ext.clone()) else {
            // Already offered (a second view led by this voter proposes it again), or malformed.
            return Some(
                crate::cert::seal_payload(&p, &ext).filter(|d| self.seals.get(&d.0).is_some()),
            );
        };
        self.counters.seals_proposed += 1;
        self.out.push(DeskOut::SealOffer { proposal: p, ext });
        Some(Some(d))
    }

    /// The seal proposed again on itself, when `parent` is a seal this voter holds that is not
    /// final yet (None: not that case, propose as usual; `Some(None)`: the leader's own check of
    /// it does not pass yet).
    ///
    /// Simplex finalizes a notarized block either by its own view's finalize votes or by a
    /// descendant's finalization. A seal's view can end notarized with too few finalize votes (a
    /// voter whose check was still fetching the tail nullified it); every later view then builds
    /// on the seal, and nothing can follow it — the next tenure starts only once the seal is
    /// final (07 §9.4). So the leader proposes the seal's own digest again on it: the same
    /// proposal and ext, whose finalization is a certificate over the seal's payload like the
    /// first view's would have been (`verify_seal_with` checks either), and which finalizes the
    /// range once.
    pub(super) fn seal_repropose(
        &mut self,
        parent: &Digest,
        now: u64,
        ledger: &mut impl Ledger,
    ) -> Option<Option<Digest>> {
        let (p, ext) = self.seals.get(&parent.0)?.clone();
        if p.last_height <= self.final_height {
            return None;
        }
        if ledger.check_seal(&p, &ext, now) != Check::True {
            return Some(None);
        }
        self.counters.seals_reproposed += 1;
        Some(Some(*parent))
    }

    /// `verify` of a seal digest held as an offer: the parent rule (`again`: the seal proposed
    /// on itself, [`Desk::seal_repropose`]), then the ledger's own check of the seal. None: not a
    /// seal this voter holds.
    pub(super) fn seal_check(
        &mut self,
        payload: &[u8; 32],
        parent_last: Option<u64>,
        again: bool,
        now: u64,
        ledger: &mut impl Ledger,
    ) -> Option<Check> {
        let (p, ext) = self.seals.get(payload)?.clone();
        if let Some(pl) = parent_last.filter(|_| !again) {
            if p.first_height != pl + 1 {
                return Some(Check::False {
                    at: p.first_height,
                    contradiction: true,
                });
            }
        }
        Some(ledger.check_seal(&p, &ext, now))
    }

    /// A finalized seal: its certificate with the ext (07 §9.4).
    pub(super) fn seal_final(&mut self, f: &crate::Finalization) -> Option<Range> {
        let (p, ext) = self.seals.get(&f.proposal.payload.0)?.clone();
        if p.last_height <= self.final_height {
            // Final already: its first view's finalization and a re-proposal's
            // ([`Desk::seal_repropose`]) can both complete; one certificate goes out.
            return self.seals.range(&f.proposal.payload.0);
        }
        if let Some(c) = crate::cert::from_finalization_of(&self.voters, f, &p, Some(&ext)) {
            self.counters.seals_final += 1;
            self.out.push(DeskOut::SealCert { cert: c, ext });
        }
        self.seals.range(&f.proposal.payload.0)
    }
}
