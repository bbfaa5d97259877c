//! The voters of one (home, epoch) as Simplex's participants (07 §6.3, §13.1).
//!
//! 07 numbers voters by their position in `REP_Membership.voters` (the voter index of 07 §2.2,
//! which `REP_FinalityCert` entries carry). commonware numbers participants by their position in
//! the *sorted* key set. [`Voters`] holds both orders and converts between them, so every index
//! that leaves this crate is a membership index and every index handed to commonware is its own.
//! The round-robin elector runs over commonware's order: still every voter once in n views,
//! never one twice in a row (07 §6.3's requirement), in key order rather than membership order.

use commonware_codec::DecodeFixed as _;
use commonware_utils::ordered::{Quorum as _, Set};
use commonware_utils::{Faults as _, N3f1, Participant};
use vyrn_wire::msg::ctrl::RepMembership;

use crate::{PublicKey, Scheme, NAMESPACE};

/// Most voters in a set (BASE has 4, CHAIN 5; signer sets are 64-bit masks).
pub const MAX_VOTERS: usize = 64;

/// Why a voter set cannot be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VotersError {
    /// No voters, or more than [`MAX_VOTERS`].
    Size,
    /// A vote key is not a valid Ed25519 point (by its index).
    BadKey(u8),
    /// Two voters share a key.
    DuplicateKey,
    /// `q` differs from Simplex's quorum for n (2f + 1 of 3f + 1: BASE 3 of 4, CHAIN 4 of 5).
    Quorum {
        /// The membership's q.
        q: u8,
        /// Simplex's quorum for n.
        simplex: u32,
    },
    /// The membership breaks a rule of 07 §13.1.
    Membership(vyrn_wire::msg::ctrl::MembershipError),
}

impl std::fmt::Display for VotersError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            VotersError::Size => write!(f, "a voter set has 1..={MAX_VOTERS} voters"),
            VotersError::BadKey(i) => write!(f, "voter {i}: vote_key is not an Ed25519 point"),
            VotersError::DuplicateKey => write!(f, "two voters share a vote_key"),
            VotersError::Quorum { q, simplex } => {
                write!(f, "q = {q}, but Simplex's quorum for this n is {simplex}")
            }
            VotersError::Membership(e) => write!(f, "membership: {e}"),
        }
    }
}

impl std::error::Error for VotersError {}

/// The voting set of one epoch: keys in membership order, Simplex's sorted set, the index maps
/// both ways and a verifier-only scheme.
#[derive(Debug, Clone)]
pub struct Voters {
    epoch: u32,
    keys: Vec<PublicKey>,
    raw: Vec<[u8; 32]>,
    set: Set<PublicKey>,
    to_cw: Vec<Participant>,
    to_member: Vec<u8>,
    q: usize,
    verifier: Scheme,
}

impl Voters {
    /// The voters of `epoch` with vote keys `keys` (membership order) and quorum `q`.
    pub fn new(epoch: u32, keys: &[[u8; 32]], q: u8) -> Result<Voters, VotersError> {
        if keys.is_empty() || keys.len() > MAX_VOTERS {
            return Err(VotersError::Size);
        }
        let mut pks = Vec::with_capacity(keys.len());
        for (i, k) in keys.iter().enumerate() {
            let pk = PublicKey::decode_fixed(*k).map_err(|_| VotersError::BadKey(i as u8))?;
            pks.push(pk);
        }
        let set = Set::try_from(pks.clone()).map_err(|_| VotersError::DuplicateKey)?;
        let simplex = N3f1::quorum(keys.len());
        if q as u32 != simplex {
            return Err(VotersError::Quorum { q, simplex });
        }
        let mut to_cw = Vec::with_capacity(keys.len());
        let mut to_member = vec![0u8; keys.len()];
        for (i, pk) in pks.iter().enumerate() {
            let p = set.index(pk).ok_or(VotersError::DuplicateKey)?;
            to_cw.push(p);
            to_member[p.get() as usize] = i as u8;
        }
        let verifier = Scheme::verifier(NAMESPACE, set.clone());
        Ok(Voters {
            epoch,
            keys: pks,
            raw: keys.to_vec(),
            set,
            to_cw,
            to_member,
            q: q as usize,
            verifier,
        })
    }

    /// The voters of a validated `REP_Membership` for `epoch` (07 §13.1; the record's own
    /// certificate is the caller's to check against the previous set).
    pub fn from_membership(m: &RepMembership, epoch: u32) -> Result<Voters, VotersError> {
        m.validate().map_err(VotersError::Membership)?;
        let keys: Vec<[u8; 32]> = m.voters.iter().map(|v| v.vote_key).collect();
        Voters::new(epoch, &keys, m.q)
    }

    /// The voters of `epoch` with vote keys `keys` (membership order) at Simplex's own quorum
    /// for their count (a home file's `[voter.N]` sections, which carry no `q`).
    pub fn with_simplex_quorum(epoch: u32, keys: &[[u8; 32]]) -> Result<Voters, VotersError> {
        Voters::new(epoch, keys, Self::quorum_for(keys.len()))
    }

    /// Simplex's quorum for `n` voters (2f + 1 of 3f + 1; BASE 3 of 4, CHAIN 4 of 5).
    pub fn quorum_for(n: usize) -> u8 {
        N3f1::quorum(n) as u8
    }

    /// The epoch.
    pub fn epoch(&self) -> u32 {
        self.epoch
    }

    /// n.
    pub fn n(&self) -> usize {
        self.keys.len()
    }

    /// Q (07 INV-QUORUM).
    pub fn quorum(&self) -> usize {
        self.q
    }

    /// f, the faults the set tolerates.
    pub fn max_faults(&self) -> usize {
        self.n() - self.q
    }

    /// The key of membership index `i`.
    pub fn key(&self, i: u8) -> Option<&PublicKey> {
        self.keys.get(i as usize)
    }

    /// The raw key bytes of membership index `i`.
    pub fn key_bytes(&self, i: u8) -> Option<&[u8; 32]> {
        self.raw.get(i as usize)
    }

    /// Simplex's participant set (sorted keys).
    pub fn set(&self) -> &Set<PublicKey> {
        &self.set
    }

    /// commonware's index of membership index `i`.
    pub fn participant(&self, i: u8) -> Option<Participant> {
        self.to_cw.get(i as usize).copied()
    }

    /// The membership index of commonware's participant `p`.
    pub fn member(&self, p: Participant) -> Option<u8> {
        self.to_member.get(p.get() as usize).copied()
    }

    /// The membership index of `key`.
    pub fn index_of(&self, key: &PublicKey) -> Option<u8> {
        self.set.index(key).and_then(|p| self.member(p))
    }

    /// A verifier-only Simplex scheme over this set.
    pub fn verifier(&self) -> &Scheme {
        &self.verifier
    }

    /// A signing scheme for the voter holding `key` (None: not a voter of this set).
    pub fn signer(&self, key: crate::PrivateKey) -> Option<Scheme> {
        Scheme::signer(NAMESPACE, self.set.clone(), key)
    }
}
