//! A sequencer that dies after its last block, sealed through Simplex (07 §9.4).
//!
//! The scripted sequencer closes `blocks` blocks and falls silent at `T = blocks × block`, its
//! last frame. The stages before the seal proposal (07 §9.7 rows 1–4: the last frame reaches
//! every voter, silence detection, Silence and TailReports all-to-all, fetches) are modelled by
//! two times: the tenure is deposed at every voter at `T + detect`, and the seal leader's prefix
//! is ready at `T + ready`. From there on it is the production desk and Simplex: the leader's
//! ledger hands its seal to the desk, the desk proposes `BLAKE3(proposal ‖ ext)` and offers it to
//! the other voters (one hop), each voter checks the offer against its own scripted prefix, and
//! the seal is notarized and finalized with a certificate. Stages 5–7 are what this measures.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use vyrn_consensus::{Check, Desk, SealAsk};
use vyrn_wire::header::Hash;
use vyrn_wire::msg::consensus::{ProposalKind, RepProposal, RepSealExt};

use super::{SimLedger, VoterSpec, EPOCH};

/// The seal's timing after the sequencer's last frame.
#[derive(Debug, Clone, Copy)]
pub struct SealSim {
    /// Deposition at every voter (07 §9.7 rows 1–3: 0.8 + 2.0 + 0.8 = 3.6 ms budget).
    pub detect: Duration,
    /// The leader's prefix ready to propose (row 4 ends: 5.2 ms budget).
    pub ready: Duration,
}

impl SealSim {
    /// 07 §9.7's budgets: deposed at 3.6 ms, the prefix ready at 5.2 ms.
    pub fn budget() -> Self {
        SealSim {
            detect: Duration::from_micros(3_600),
            ready: Duration::from_micros(5_200),
        }
    }
}

/// `header_hash` of the scripted seal header after `blocks` signed blocks.
pub fn seal_hash(blocks: u64) -> Hash {
    let mut h = blake3::Hasher::new();
    h.update(b"sim seal header");
    h.update(&blocks.to_le_bytes());
    *h.finalize().as_bytes()
}

/// The scripted seal ext: the prefix ends at frames `[10·blocks + 3, 10·blocks + 1]`, the
/// standby (sequencer index 1) starts tenure 1, nothing unavailable.
pub fn seal_ext(blocks: u64) -> RepSealExt {
    RepSealExt {
        end_frame_seq: [10 * blocks + 3, 10 * blocks + 1],
        next_seq: 1,
        next_tenure: 1,
        unavail: Vec::new(),
    }
}

/// What one voter's ledger knows of the seal.
#[derive(Debug, Clone)]
pub(super) struct SealScript {
    blocks: u64,
    deposed_ns: u64,
    /// When this voter's own tail is complete (the leader's prefix time, or the voter's
    /// header delay past it if that is later).
    ready_ns: u64,
    ext: RepSealExt,
}

impl SealScript {
    pub(super) fn new(s: &SealSim, blocks: u64, block_ns: u64, spec: &VoterSpec) -> Self {
        let t = blocks * block_ns;
        SealScript {
            blocks,
            deposed_ns: t + s.detect.as_nanos() as u64,
            ready_ns: t + (s.ready.max(spec.header_delay)).as_nanos() as u64,
            ext: RepSealExt {
                next_seq: if spec.seal_disagrees { 2 } else { 1 },
                ..seal_ext(blocks)
            },
        }
    }
}

/// Offers in flight to each voter: (delivery ns, proposal, ext).
pub(super) type SealMail = Arc<Mutex<Vec<VecDeque<(u64, RepProposal, RepSealExt)>>>>;

/// Voter `from`'s offer to every other voter, delivered at `at`.
pub(super) fn post(mail: &SealMail, from: usize, at: u64, p: &RepProposal, ext: &RepSealExt) {
    if let Ok(mut m) = mail.lock() {
        for (j, q) in m.iter_mut().enumerate() {
            if j != from {
                q.push_back((at, *p, ext.clone()));
            }
        }
    }
}

/// The offers due at voter `i` by `now`, into its desk.
pub(super) fn deliver(mail: &SealMail, i: usize, now: u64, desk: &mut Desk) {
    let due: Vec<(RepProposal, RepSealExt)> = match mail.lock() {
        Ok(mut m) => {
            let q = &mut m[i];
            let mut v = Vec::new();
            while q.front().is_some_and(|x| x.0 <= now) {
                if let Some((_, p, e)) = q.pop_front() {
                    v.push((p, e));
                }
            }
            v
        }
        Err(_) => Vec::new(),
    };
    for (p, e) in due {
        let _ = desk.offer_seal(p, e);
    }
}

impl SimLedger {
    /// The leader's side: no seal before the deposition, wait until the prefix is ready, then
    /// the range `(parent_last, H*]` plus the seal header at `H* + 1`.
    pub(super) fn seal_ask(&self, parent_last: u64) -> SealAsk {
        let Some(s) = &self.seal else {
            return SealAsk::No;
        };
        if self.now < s.deposed_ns {
            return SealAsk::No;
        }
        if self.now < s.ready_ns || parent_last > s.blocks {
            return SealAsk::Wait;
        }
        let p = RepProposal {
            kind: ProposalKind::Seal,
            epoch: EPOCH,
            first_height: parent_last + 1,
            last_height: s.blocks + 1,
            last_hash: seal_hash(s.blocks),
            excl_root: [0; 32],
        };
        if p.validate().is_err() {
            return SealAsk::Wait;
        }
        SealAsk::Ready(Box::new((p, s.ext.clone())))
    }

    /// A voter's side: the seal must end with its own seal header (`last_hash`) and name the
    /// same prefix and next sequencer; pending until its tail and the signed headers are held.
    pub(super) fn seal_check(&self, p: &RepProposal, ext: &RepSealExt) -> Check {
        let Some(s) = &self.seal else {
            return Check::False {
                at: p.first_height,
                contradiction: true,
            };
        };
        if p.last_height != s.blocks + 1 || p.last_hash != seal_hash(s.blocks) || *ext != s.ext {
            return Check::False {
                at: p.last_height,
                contradiction: true,
            };
        }
        if self.now < s.ready_ns {
            return Check::Pending { at: p.last_height };
        }
        for h in p.first_height..=s.blocks {
            if !self.held(h) {
                return Check::Pending { at: h };
            }
        }
        Check::True
    }
}
