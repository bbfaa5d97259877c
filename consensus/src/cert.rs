//! `REP_FinalityCert` (07 §6.5): built from a Simplex finalization, and checked.
//!
//! Each entry's signature is the voter's Simplex finalize signature as produced by
//! `simplex::scheme::ed25519` over `Proposal { round: (epoch, view), parent: parent_view,
//! payload: digest }` under namespace `b"vyrn-v1"`, where `digest` is
//! `BLAKE3("vyrn v1 proposal" ‖ REP_Proposal)`. The signed bytes are those of the pinned
//! commonware-consensus version (2026.10.0): [`finalize_subject_bytes`] gives them for the
//! docs' golden vector. [`verify_finality_cert`] is the one implementation of the check
//! (07 §6.5: "No other crate reimplements the check").

use commonware_codec::types::lazy::Lazy;
use commonware_codec::{DecodeFixed as _, Encode as _};
use commonware_consensus::simplex::types::{Proposal, Subject};
use commonware_consensus::types::{Epoch, Round, View};
use commonware_cryptography::certificate::{Attestation, Scheme as _};
use commonware_parallel::Sequential;
use vyrn_wire::msg::consensus::{
    CertEntry, ProposalKind, RepFinalityCert, RepProposal, RepSealExt,
};
use vyrn_wire::msg::ctrl::RepMembership;

use crate::voters::{Voters, VotersError};
use crate::{Digest, Scheme};

/// Why a `REP_FinalityCert` is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CertErr {
    /// The membership cannot be used (its rules of 07 §13.1, a key, or its quorum).
    Membership(VotersError),
    /// The certificate's epoch is not the voter set's, or differs from its proposal's.
    Epoch,
    /// The proposal breaks its own rules (07 §6.3: range bound, kind).
    Proposal,
    /// `view` is not after `parent_view`.
    View,
    /// Entries not in strictly ascending index order (a duplicate signer included).
    Order,
    /// Fewer entries than Q.
    TooFew {
        /// Entries present.
        have: usize,
        /// Q.
        need: usize,
    },
    /// An entry's index names no voter.
    UnknownSigner(u8),
    /// An entry's signature does not verify (the first bad index).
    BadSignature(u8),
    /// A seal certificate (kind 1) checked without its `REP_SealExt`, a headers certificate
    /// checked with one, or a seal ext that does not encode (07 §9.4: the seal's payload is
    /// `BLAKE3(proposal ‖ seal ext)`).
    SealExt,
}

impl std::fmt::Display for CertErr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CertErr::Membership(e) => write!(f, "membership: {e}"),
            CertErr::Epoch => write!(f, "the certificate's epoch is not the membership's"),
            CertErr::Proposal => write!(f, "the proposal breaks 07 §6.3 (range or kind)"),
            CertErr::View => write!(f, "view is not after parent_view"),
            CertErr::Order => write!(f, "entries are not in strictly ascending voter order"),
            CertErr::TooFew { have, need } => write!(f, "{have} signatures, Q is {need}"),
            CertErr::UnknownSigner(i) => write!(f, "entry names voter {i}, not in the set"),
            CertErr::BadSignature(i) => write!(f, "voter {i}'s signature does not verify"),
            CertErr::SealExt => write!(
                f,
                "a seal certificate is checked with its REP_SealExt, a headers certificate without"
            ),
        }
    }
}

impl std::error::Error for CertErr {}

/// The Simplex payload of a proposal: `BLAKE3("vyrn v1 proposal" ‖ REP_Proposal)` (07 §6.3).
pub fn payload_digest(p: &RepProposal) -> Digest {
    commonware_cryptography::blake3::Digest(p.digest())
}

/// The Simplex payload of a seal proposal: `BLAKE3(REP_Proposal ‖ REP_SealExt)` (07 §9.4).
/// None when the ext does not encode (more unavailable packets than the wire carries, or out of
/// order).
pub fn seal_payload(p: &RepProposal, ext: &RepSealExt) -> Option<Digest> {
    vyrn_wire::msg::consensus::seal_digest(p, ext)
        .ok()
        .map(commonware_cryptography::blake3::Digest)
}

/// The payload of `p`: its headers digest, or with `ext` its seal digest (None when the kind and
/// the presence of `ext` disagree, or the ext does not encode).
pub fn payload_of(p: &RepProposal, ext: Option<&RepSealExt>) -> Option<Digest> {
    match (p.kind, ext) {
        (ProposalKind::Headers, None) => Some(payload_digest(p)),
        (ProposalKind::Seal, Some(e)) => seal_payload(p, e),
        _ => None,
    }
}

/// The Simplex proposal a finalize vote signs.
pub fn cw_proposal(epoch: u32, view: u64, parent_view: u64, p: &RepProposal) -> Proposal<Digest> {
    cw_proposal_of(epoch, view, parent_view, payload_digest(p))
}

/// The Simplex proposal over `payload` (a headers or a seal digest).
fn cw_proposal_of(epoch: u32, view: u64, parent_view: u64, payload: Digest) -> Proposal<Digest> {
    Proposal::new(
        Round::new(Epoch::new(epoch as u64), View::new(view)),
        View::new(parent_view),
        payload,
    )
}

/// The exact message a finalize signature covers: commonware's `union_unique(namespace ‖
/// "_FINALIZE", Proposal::encode())` — for the docs' golden vector and a second verifier.
pub fn finalize_subject_bytes(epoch: u32, view: u64, parent_view: u64, p: &RepProposal) -> Vec<u8> {
    let ns = commonware_utils::union(crate::NAMESPACE, b"_FINALIZE");
    let msg = cw_proposal(epoch, view, parent_view, p).encode();
    commonware_utils::union_unique(&ns, &msg)
}

/// Signs finalize votes as one voter (what Simplex's ed25519 scheme signs): for tests, the
/// sequencer's voter doubles and the docs' vectors — a running voter's engine signs its own.
#[derive(Debug, Clone)]
pub struct FinalizeSigner {
    scheme: Scheme,
}

impl FinalizeSigner {
    /// The signer holding `seed` in `voters` (None: that key is not a voter of the set).
    pub fn new(voters: &Voters, seed: &[u8; 32]) -> Option<Self> {
        Some(FinalizeSigner {
            scheme: voters.signer(crate::private_key(seed))?,
        })
    }

    /// The finalize signature over `p` at `(epoch, view)` with parent `parent_view`.
    pub fn sign(&self, epoch: u32, view: u64, parent_view: u64, p: &RepProposal) -> [u8; 64] {
        self.sign_payload(epoch, view, parent_view, payload_digest(p))
    }

    /// The finalize signature over a seal proposal `p` with its `ext` (07 §9.4); zeros when the
    /// ext does not encode.
    pub fn sign_seal(
        &self,
        epoch: u32,
        view: u64,
        parent_view: u64,
        p: &RepProposal,
        ext: &RepSealExt,
    ) -> [u8; 64] {
        match seal_payload(p, ext) {
            Some(d) => self.sign_payload(epoch, view, parent_view, d),
            None => [0; 64],
        }
    }

    fn sign_payload(&self, epoch: u32, view: u64, parent_view: u64, payload: Digest) -> [u8; 64] {
        let proposal = cw_proposal_of(epoch, view, parent_view, payload);
        let mut out = [0u8; 64];
        if let Some(sig) = self
            .scheme
            .sign::<Digest>(Subject::Finalize {
                proposal: &proposal,
            })
            .and_then(|a| a.signature.get().cloned())
        {
            out.copy_from_slice(sig.as_ref());
        }
        out
    }
}

/// Voter `seed`'s finalize signature over `p` (see [`FinalizeSigner`]).
pub fn sign_finalize(
    voters: &Voters,
    seed: &[u8; 32],
    epoch: u32,
    view: u64,
    parent_view: u64,
    p: &RepProposal,
) -> Option<[u8; 64]> {
    Some(FinalizeSigner::new(voters, seed)?.sign(epoch, view, parent_view, p))
}

fn attestation(voters: &Voters, e: &CertEntry) -> Option<Attestation<Scheme>> {
    let signer = voters.participant(e.index)?;
    let sig = commonware_cryptography::ed25519::Signature::decode_fixed(e.sig).ok()?;
    Some(Attestation {
        signer,
        signature: Lazy::from(sig),
    })
}

/// The entries of `cert` whose finalize signature verifies under `voters` (membership indices,
/// ascending), with one batch verification and, only when the batch fails, each entry on its
/// own. An entry naming no voter, or with bytes that are no signature, is not valid. The
/// certificate's other rules are [`verify_finality_cert`]'s; this is the finality listener's
/// per-vote check (07 §6.8).
pub fn valid_entries(voters: &Voters, cert: &RepFinalityCert) -> Vec<u8> {
    valid_entries_of(voters, cert, payload_digest(&cert.proposal))
}

/// [`valid_entries`] over an explicit payload (a seal's).
fn valid_entries_of(voters: &Voters, cert: &RepFinalityCert, payload: Digest) -> Vec<u8> {
    let proposal = cw_proposal_of(cert.epoch, cert.view, cert.parent_view, payload);
    let atts: Vec<Attestation<Scheme>> = cert
        .entries
        .iter()
        .filter_map(|e| attestation(voters, e))
        .collect();
    if atts.is_empty() {
        return Vec::new();
    }
    let v = voters.verifier().verify_attestations::<_, Digest, _>(
        &mut rand::rng(),
        Subject::Finalize {
            proposal: &proposal,
        },
        atts,
        &Sequential,
    );
    let mut ok: Vec<u8> = v
        .verified
        .iter()
        .filter_map(|a| voters.member(a.signer))
        .collect();
    ok.sort_unstable();
    ok
}

/// Check a `REP_FinalityCert` against the voters of `membership` (07 §6.5): the membership is
/// valid, the epochs agree, the proposal keeps 07 §6.3's rules, `view > parent_view`, the
/// entries ascend strictly, at least Q of them, each names a voter, and every signature is that
/// voter's finalize signature over the proposal.
pub fn verify_finality_cert(
    cert: &RepFinalityCert,
    membership: &RepMembership,
) -> Result<(), CertErr> {
    let voters = Voters::from_membership(membership, cert.epoch).map_err(CertErr::Membership)?;
    verify_with(cert, &voters)
}

/// Check a seal certificate (07 §9.4): a `REP_FinalityCert` over a kind-1 proposal whose
/// signatures cover `BLAKE3(proposal ‖ ext)`. With its certificate the seal block needs no
/// `seq_sig`: the certificate stands in for it.
pub fn verify_seal_cert(
    cert: &RepFinalityCert,
    ext: &RepSealExt,
    membership: &RepMembership,
) -> Result<(), CertErr> {
    let voters = Voters::from_membership(membership, cert.epoch).map_err(CertErr::Membership)?;
    verify_seal_with(cert, ext, &voters)
}

/// [`verify_seal_cert`] against a voter set already built.
pub fn verify_seal_with(
    cert: &RepFinalityCert,
    ext: &RepSealExt,
    voters: &Voters,
) -> Result<(), CertErr> {
    let payload = payload_of(&cert.proposal, Some(ext)).ok_or(CertErr::SealExt)?;
    verify_payload(cert, voters, payload)
}

/// [`verify_finality_cert`] against a voter set already built (the same check). A seal
/// certificate is refused here (`SealExt`): [`verify_seal_with`] checks it with its ext.
pub fn verify_with(cert: &RepFinalityCert, voters: &Voters) -> Result<(), CertErr> {
    let payload = payload_of(&cert.proposal, None).ok_or(CertErr::SealExt)?;
    verify_payload(cert, voters, payload)
}

fn verify_payload(cert: &RepFinalityCert, voters: &Voters, payload: Digest) -> Result<(), CertErr> {
    if cert.epoch != voters.epoch() || cert.proposal.epoch != cert.epoch {
        return Err(CertErr::Epoch);
    }
    cert.proposal.validate().map_err(|_| CertErr::Proposal)?;
    if cert.view <= cert.parent_view {
        return Err(CertErr::View);
    }
    if !cert.entries.windows(2).all(|w| w[0].index < w[1].index) {
        return Err(CertErr::Order);
    }
    if cert.entries.len() < voters.quorum() {
        return Err(CertErr::TooFew {
            have: cert.entries.len(),
            need: voters.quorum(),
        });
    }
    if let Some(e) = cert.entries.iter().find(|e| e.index as usize >= voters.n()) {
        return Err(CertErr::UnknownSigner(e.index));
    }
    let ok = valid_entries_of(voters, cert, payload);
    if let Some(e) = cert.entries.iter().find(|e| !ok.contains(&e.index)) {
        return Err(CertErr::BadSignature(e.index));
    }
    Ok(())
}

/// The Simplex finalization a `REP_FinalityCert` stands for, once it verifies against
/// `voters` ([`verify_with`]): what an engine starts from when its own journal partition is
/// gone and the cert journal holds the newest certificate (`simplex::Floor::Finalized`). The
/// inverse of [`from_finalization`].
pub fn to_finalization(
    voters: &Voters,
    cert: &RepFinalityCert,
) -> Result<crate::Finalization, CertErr> {
    to_finalization_of(voters, cert, None)
}

/// [`to_finalization`] of a certificate over a headers proposal (`ext` None) or a seal (`ext`
/// its seal ext).
pub fn to_finalization_of(
    voters: &Voters,
    cert: &RepFinalityCert,
    ext: Option<&RepSealExt>,
) -> Result<crate::Finalization, CertErr> {
    let payload = payload_of(&cert.proposal, ext).ok_or(CertErr::SealExt)?;
    verify_payload(cert, voters, payload)?;
    // commonware's certificate: signers as a bitmap over its participant order, signatures in
    // that order.
    let mut by_participant = Vec::with_capacity(cert.entries.len());
    for e in &cert.entries {
        let p = voters
            .participant(e.index)
            .ok_or(CertErr::UnknownSigner(e.index))?;
        let sig = commonware_cryptography::ed25519::Signature::decode_fixed(e.sig)
            .map_err(|_| CertErr::BadSignature(e.index))?;
        by_participant.push((p, sig));
    }
    by_participant.sort_unstable_by_key(|(p, _)| *p);
    let signers = commonware_cryptography::certificate::Signers::new(
        voters.n() as u32,
        by_participant.iter().map(|(p, _)| *p),
    )
    .map_err(|_| CertErr::Order)?;
    Ok(crate::Finalization {
        proposal: cw_proposal_of(cert.epoch, cert.view, cert.parent_view, payload),
        certificate: commonware_cryptography::ed25519::certificate::Certificate {
            signers,
            signatures: by_participant
                .into_iter()
                .map(|(_, s)| Lazy::from(s))
                .collect(),
        },
    })
}

/// A `REP_FinalityCert` from a Simplex finalization whose proposal is `proposal` (the payload
/// must be its digest): entries in membership order. None when the finalization names a signer
/// outside the set or carries a signature that is not there.
pub fn from_finalization(
    voters: &Voters,
    f: &crate::Finalization,
    proposal: &RepProposal,
) -> Option<RepFinalityCert> {
    from_finalization_of(voters, f, proposal, None)
}

/// [`from_finalization`] of a headers proposal (`ext` None) or a seal (`ext` its seal ext).
pub fn from_finalization_of(
    voters: &Voters,
    f: &crate::Finalization,
    proposal: &RepProposal,
    ext: Option<&RepSealExt>,
) -> Option<RepFinalityCert> {
    if Some(f.proposal.payload) != payload_of(proposal, ext) {
        return None;
    }
    let mut entries = Vec::with_capacity(f.certificate.signatures.len());
    for (p, s) in f.certificate.signers.iter().zip(&f.certificate.signatures) {
        let index = voters.member(p)?;
        let sig = s.get()?;
        let mut b = [0u8; 64];
        b.copy_from_slice(sig.as_ref());
        entries.push(CertEntry { index, sig: b });
    }
    entries.sort_unstable_by_key(|e| e.index);
    Some(RepFinalityCert {
        epoch: u32::try_from(f.proposal.round.epoch().get()).ok()?,
        view: f.proposal.round.view().get(),
        parent_view: f.proposal.parent.get(),
        proposal: *proposal,
        entries,
    })
}
