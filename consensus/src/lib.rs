//! `vyrn-consensus`: Simplex among the voters of a home (07 §6).
//!
//! The n voting replicas run `commonware-consensus`'s Simplex (07 §6.3, D9) over ranges of
//! sequencer-signed headers. The sequencer never votes; a voter votes only on what it holds and
//! has checked (D10, INV-REP-4). This crate is the one place that
//!
//! - maps a home's membership onto Simplex's participants ([`Voters`]: the voters of
//!   `REP_Membership` in its order, ed25519, namespace [`NAMESPACE`]);
//! - turns Simplex's automaton calls into the vote rule of 07 §6.4 ([`Desk`], the voter's
//!   synchronous side, asked by [`App`], its asynchronous side): `propose` takes every
//!   contiguous held header after the parent's `last_height` up to
//!   REP_MAX_HDRS_PER_PROPOSAL and waits for its own verify; `verify` is pending while anything
//!   is missing, false at once on a contradiction and after REP_VERIFY_WAIT_MS; `certify`
//!   returns verify's answer for the same payload; the relay is a no-op (payloads reach every
//!   voter through frames and data frames);
//! - exports `REP_FinalityCert` (07 §6.5) from each finalization and checks it
//!   ([`verify_finality_cert`], the only implementation of that check);
//! - counts finalize votes for the sequencer's finality listener ([`FinalityListener`], 07
//!   §6.8: `final_height` only with Q valid votes for one proposal).
//!
//! The replica (its verdict is the [`Ledger`]) and the simulator drive the same [`Desk`]; the
//! engine runs on commonware's deterministic runtime in tests and on its tokio runtime with
//! authenticated p2p in a process ([`process`]).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod app;
pub mod cert;
pub mod desk;
pub mod engine;
pub mod ingress;
pub mod listener;
pub mod process;
pub mod roots;
pub mod voters;

pub use app::App;
pub use cert::{
    finalize_subject_bytes, payload_digest, sign_finalize, verify_finality_cert, CertErr,
    FinalizeSigner,
};
pub use desk::{Check, Desk, DeskConfig, DeskCounters, DeskOut, Ledger, SealAsk};
pub use listener::{FinalityListener, ListenerCounters, VoteOutcome};
pub use voters::{Voters, VotersError};

/// The Simplex namespace of a home (07 §6.3): simplex appends `_NOTARIZE`, `_NULLIFY`,
/// `_FINALIZE` per message.
pub const NAMESPACE: &[u8] = b"vyrn-v1";
/// The state-root aggregation namespace (07 §7.4).
pub const ROOT_NAMESPACE: &[u8] = b"vyrn-v1-root";
/// The p2p handshake namespace (separate from the consensus one).
pub const P2P_NAMESPACE: &[u8] = b"vyrn-v1-p2p";

/// The signing scheme of 07 §6.3: `simplex::scheme::ed25519`.
pub type Scheme = commonware_consensus::simplex::scheme::ed25519::Scheme;
/// A Simplex payload: the 32-byte digest of a `REP_Proposal` (07 §6.3; BLAKE3 with the
/// domain "vyrn v1 proposal").
pub type Digest = commonware_cryptography::blake3::Digest;
/// A voter's public key.
pub type PublicKey = commonware_cryptography::ed25519::PublicKey;
/// A voter's private key.
pub type PrivateKey = commonware_cryptography::ed25519::PrivateKey;
/// What Simplex hands `propose` and `verify`.
pub type Context = commonware_consensus::simplex::types::Context<Digest, PublicKey>;
/// Simplex's activity stream, as the reporter sees it.
pub type Activity = commonware_consensus::simplex::types::Activity<Scheme, Digest>;
/// A Simplex finalization (a certificate of Q finalize votes).
pub type Finalization = commonware_consensus::simplex::types::Finalization<Scheme, Digest>;

/// A voter's private key from its 32-byte Ed25519 seed (the `keys/voter-N.key` file).
pub fn private_key(seed: &[u8; 32]) -> PrivateKey {
    use commonware_codec::DecodeFixed as _;
    // A 32-byte seed is always a valid ed25519 private key.
    PrivateKey::decode_fixed(*seed).unwrap_or_else(|_| unreachable!("32 bytes always decode"))
}

/// The genesis payload of an epoch whose handoff ends at `last_height` with `log_hash`
/// (07 §6.3: genesis of an epoch is the HandoffRecord's last_height).
pub fn genesis_digest(epoch: u32, last_height: u64, log_hash: &[u8; 32]) -> Digest {
    let mut h = blake3::Hasher::new();
    h.update(b"vyrn v1 genesis");
    h.update(&epoch.to_le_bytes());
    h.update(&last_height.to_le_bytes());
    h.update(log_hash);
    commonware_cryptography::blake3::Digest(*h.finalize().as_bytes())
}
