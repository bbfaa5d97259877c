//! The seal's messages beside Simplex (07 §9.4): `SealOffer` (0x1B) and `SealCert` (0x1C).

use super::{ty, Body, Malformed, Reader, RepFinalityCert, RepProposal, RepSealExt};
use crate::msg::{finish, put_u16};

/// Most unavailable packets a [`SealOffer`] or [`SealCert`] carries: one datagram (project
/// bound, 8 KiB of keys; a seal whose list is longer is not offered over one datagram).
pub const SEAL_MSG_UNAVAIL_MAX: usize = 1024;

fn check_seal_ext(p: &RepProposal, ext: &RepSealExt) -> Result<(), Malformed> {
    if p.kind != crate::msg::consensus::ProposalKind::Seal {
        return Err(Malformed::BadKind);
    }
    if ext.unavail.len() > SEAL_MSG_UNAVAIL_MAX {
        return Err(Malformed::TooMany);
    }
    p.validate()?;
    // The ext's own rules (ascending keys) are its encoder's: check them without writing.
    ext.to_bytes().map(|_| ())
}

/// `SealOffer` (07 §9.4): the seal proposal a leader made, with its ext, so every voter can
/// index its payload `BLAKE3(proposal ‖ ext)` and check it. Bytes: type byte, the 85 proposal
/// bytes (kind 1), the ext bytes to the end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SealOffer {
    /// The kind-1 proposal.
    pub proposal: RepProposal,
    /// Its seal extension (at most [`SEAL_MSG_UNAVAIL_MAX`] unavailable packets).
    pub ext: RepSealExt,
}

impl Body for SealOffer {
    fn check(&self) -> Result<(), Malformed> {
        check_seal_ext(&self.proposal, &self.ext)
    }
    fn write_body(&self, out: &mut Vec<u8>) {
        self.proposal.encode(out);
        // Checked by `check` before any byte is written.
        let _ = self.ext.encode(out);
    }
    fn read_body(r: &mut Reader<'_>) -> Result<Self, Malformed> {
        let proposal = RepProposal::read(r)?;
        let ext = RepSealExt::read(r)?;
        Ok(SealOffer { proposal, ext })
    }
}
ctrl_codec!(SealOffer, ty::SEAL_OFFER);

/// `SealCert` (07 §9.4): a finalized seal's `REP_FinalityCert` (its signatures over
/// `BLAKE3(proposal ‖ ext)`) with the ext. Bytes: type byte, cert_len u16, the certificate
/// bytes of 0x13, the ext bytes to the end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SealCert {
    /// The certificate (its proposal of kind 1).
    pub cert: RepFinalityCert,
    /// The seal extension.
    pub ext: RepSealExt,
}

impl Body for SealCert {
    fn check(&self) -> Result<(), Malformed> {
        check_seal_ext(&self.cert.proposal, &self.ext)?;
        self.cert.validate()
    }
    fn write_body(&self, out: &mut Vec<u8>) {
        // Checked by `check` before any byte is written: encoded once, in place.
        put_u16(out, self.cert.encoded_len() as u16);
        let _ = self.cert.encode(out);
        let _ = self.ext.encode(out);
    }
    fn read_body(r: &mut Reader<'_>) -> Result<Self, Malformed> {
        let n = r.u16_le()? as usize;
        let cert = RepFinalityCert::parse(r.bytes(n)?)?;
        let ext = RepSealExt::read(r)?;
        Ok(SealCert { cert, ext })
    }
}
ctrl_codec!(SealCert, ty::SEAL_CERT);
