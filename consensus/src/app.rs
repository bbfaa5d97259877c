//! The voter's asynchronous side: Simplex's `Automaton`, `CertifiableAutomaton`, `Relay` and
//! `Reporter` (07 §6.3), each call a [`Req`] to the [`crate::Desk`].
//!
//! Every method returns at once: a request goes on a bounded channel with a one-shot reply, and
//! a full channel drops the reply (the engine then times the view out, exactly as if the voter
//! had not answered), counted. The relay is a no-op (payloads travel as frames and data frames).

use std::sync::Arc;

use commonware_actor::Feedback;
use commonware_consensus::simplex::types::Attributable as _;
use commonware_consensus::simplex::Plan;
use commonware_consensus::types::Round;
use commonware_consensus::{Automaton, CertifiableAutomaton, Relay, Reporter, Viewable as _};
use commonware_utils::channel::oneshot;

use crate::ingress::{DeskLink, FaultKind, Req};
use crate::voters::Voters;
use crate::{Activity, Context, Digest, PublicKey};

/// Simplex's application for one voter: automaton, relay and reporter in one.
#[derive(Debug, Clone)]
pub struct App {
    link: DeskLink,
    voters: Arc<Voters>,
    me: u8,
}

impl App {
    /// The app of voter `me` (membership index) talking to its desk through `link`.
    pub fn new(link: DeskLink, voters: Voters, me: u8) -> Self {
        App {
            link,
            voters: Arc::new(voters),
            me,
        }
    }
}

impl Automaton for App {
    type Context = Context;
    type Digest = Digest;

    async fn propose(&mut self, context: Context) -> oneshot::Receiver<Digest> {
        let (reply, rx) = oneshot::channel();
        self.link.send(Req::Propose {
            view: context.round.view().get(),
            parent: context.parent.1,
            reply,
        });
        rx
    }

    async fn verify(&mut self, context: Context, payload: Digest) -> oneshot::Receiver<bool> {
        let (reply, rx) = oneshot::channel();
        self.link.send(Req::Verify {
            view: context.round.view().get(),
            parent: context.parent.1,
            payload,
            reply,
        });
        rx
    }
}

impl CertifiableAutomaton for App {
    async fn certify(&mut self, round: Round, payload: Digest) -> oneshot::Receiver<bool> {
        let (reply, rx) = oneshot::channel();
        self.link.send(Req::Certify {
            view: round.view().get(),
            payload,
            reply,
        });
        rx
    }
}

impl Relay for App {
    type Digest = Digest;
    type PublicKey = PublicKey;
    type Plan = Plan<PublicKey>;

    fn broadcast(&mut self, _payload: Digest, _plan: Plan<PublicKey>) -> Feedback {
        // 07 §6.3: no relay; every voter has the headers and payloads from frames.
        Feedback::Ok
    }
}

impl Reporter for App {
    type Activity = Activity;

    fn report(&mut self, activity: Activity) -> Feedback {
        match activity {
            Activity::Finalize(f) => {
                // Only this voter's own vote goes to the sequencer (07 §6.8); the others reach
                // it from their own voters.
                if self.voters.member(f.attestation.signer) != Some(self.me) {
                    return Feedback::Ok;
                }
                let Some(sig) = f.attestation.signature.get() else {
                    return Feedback::Ok;
                };
                let mut b = [0u8; 64];
                b.copy_from_slice(sig.as_ref());
                self.link.send(Req::Finalize {
                    view: f.proposal.round.view().get(),
                    parent_view: f.proposal.parent.get(),
                    payload: f.proposal.payload,
                    sig: b,
                })
            }
            Activity::Finalization(f) => self.link.send(Req::Finalized(Box::new(f))),
            Activity::Nullification(n) => self.link.send(Req::Nullified {
                view: n.view().get(),
            }),
            Activity::ConflictingNotarize(c) => {
                self.fault(FaultKind::ConflictingNotarize, c.signer(), c.view().get())
            }
            Activity::ConflictingFinalize(c) => {
                self.fault(FaultKind::ConflictingFinalize, c.signer(), c.view().get())
            }
            Activity::NullifyFinalize(c) => {
                self.fault(FaultKind::NullifyFinalize, c.signer(), c.view().get())
            }
            _ => Feedback::Ok,
        }
    }
}

impl App {
    fn fault(&self, kind: FaultKind, signer: commonware_utils::Participant, view: u64) -> Feedback {
        let Some(signer) = self.voters.member(signer) else {
            return Feedback::Ok;
        };
        self.link.send(Req::Fault { kind, signer, view })
    }
}
