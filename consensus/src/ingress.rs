//! The desk's ingress, at the bottom of the crate: the requests Simplex's asynchronous side
//! ([`crate::app`], [`crate::roots`]) sends the synchronous desk ([`crate::desk`]), and the
//! bounded channel they go on. Neither side imports the other.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::SyncSender;
use std::sync::Arc;

use commonware_actor::Feedback;
use commonware_utils::channel::oneshot;

use vyrn_wire::msg::consensus::CertEntry;

use crate::Digest;

/// Byzantine evidence Simplex reported (07 §10.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// Two notarize votes of one signer in one view.
    ConflictingNotarize,
    /// Two finalize votes of one signer in one view.
    ConflictingFinalize,
    /// A nullify and a finalize of one signer in one view.
    NullifyFinalize,
}

/// A request from the consensus side.
#[derive(Debug)]
pub enum Req {
    /// `Automaton::propose`.
    Propose {
        /// The view proposed in.
        view: u64,
        /// The parent's payload.
        parent: Digest,
        /// The answer.
        reply: oneshot::Sender<Digest>,
    },
    /// `Automaton::verify`.
    Verify {
        /// The view.
        view: u64,
        /// The parent's payload.
        parent: Digest,
        /// The payload to check.
        payload: Digest,
        /// The answer.
        reply: oneshot::Sender<bool>,
    },
    /// `CertifiableAutomaton::certify`.
    Certify {
        /// The view.
        view: u64,
        /// The payload.
        payload: Digest,
        /// The answer.
        reply: oneshot::Sender<bool>,
    },
    /// This voter's own finalize vote (reported by the engine).
    Finalize {
        /// View.
        view: u64,
        /// Parent view.
        parent_view: u64,
        /// Payload.
        payload: Digest,
        /// The signature.
        sig: [u8; 64],
    },
    /// A finalization.
    Finalized(Box<crate::Finalization>),
    /// A nullification of a view.
    Nullified {
        /// The view.
        view: u64,
    },
    /// Conflict evidence.
    Fault {
        /// What.
        kind: FaultKind,
        /// Membership index of the signer.
        signer: u8,
        /// The view.
        view: u64,
    },
    /// The aggregation engine asks for this voter's root digest of root `index` (07 §7.4).
    RootPropose {
        /// Root index.
        index: u64,
        /// The answer.
        reply: oneshot::Sender<Digest>,
    },
    /// The aggregation engine asks whether `digest` is this voter's for root `index`.
    RootVerify {
        /// Root index.
        index: u64,
        /// The digest.
        digest: Digest,
        /// The answer.
        reply: oneshot::Sender<bool>,
    },
    /// A peer's root ack whose signature verified ([`crate::roots::AckTap`]).
    RootAck {
        /// Root index.
        index: u64,
        /// Membership index of the signer.
        signer: u8,
        /// The digest it signed.
        digest: [u8; 32],
        /// Its signature.
        sig: [u8; 64],
    },
    /// The aggregation engine certified root `index` (Q signatures over `digest`).
    RootCertified {
        /// Root index.
        index: u64,
        /// The digest.
        digest: [u8; 32],
        /// The signatures, ascending membership index.
        entries: Vec<CertEntry>,
    },
    /// The aggregation engine's tip: every root index below it is certified by at least one
    /// honest voter (the engine skips ahead only then).
    RootTip {
        /// The tip.
        tip: u64,
    },
}

/// The sending half as the app holds it.
pub(crate) type DeskTx = SyncSender<Req>;

/// The sending end of a desk's channel, with its overflow counter.
#[derive(Debug, Clone)]
pub struct DeskLink {
    tx: DeskTx,
    full: Arc<AtomicU64>,
}

impl DeskLink {
    pub(crate) fn new(tx: DeskTx, full: Arc<AtomicU64>) -> Self {
        DeskLink { tx, full }
    }

    pub(crate) fn send(&self, r: Req) -> Feedback {
        match self.tx.try_send(r) {
            Ok(()) => Feedback::Ok,
            Err(std::sync::mpsc::TrySendError::Full(_)) => {
                self.full.fetch_add(1, Ordering::Relaxed);
                Feedback::Backoff
            }
            Err(std::sync::mpsc::TrySendError::Disconnected(_)) => Feedback::Closed,
        }
    }
}
