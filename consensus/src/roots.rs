//! State roots (07 §7.4): every voter signs `BLAKE3("vyrn v1 root" ‖ epoch ‖ h ‖ R(h))` at each
//! root height `h` and submits it to a `commonware-consensus::aggregation` engine (item index
//! `(h + 1) / REP_ROOT_BLOCKS − 1`, ed25519, namespace [`crate::ROOT_NAMESPACE`]); Q signatures
//! form a `REP_RootCert`.
//!
//! This module is the asynchronous side, as [`crate::App`] is for Simplex: [`RootsApp`] is the
//! aggregation engine's automaton (its `propose(index)` waits on the [`crate::Desk`] until this
//! replica's replay has computed `R(h)`) and reporter (certificates and the tip go to the desk);
//! [`AckTap`] wraps the engine's receiver and hands the desk every peer's ack whose signature
//! verifies — the engine itself drops acks for a digest other than its own, and INV-REP-9's
//! first case (two digests, each with ≥ f + 1 signatures) needs exactly those. The root gate
//! (INV-REP-7) and divergence (INV-REP-9) live in the desk, on the replica's loop.

use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};

use commonware_actor::Feedback;
use commonware_codec::DecodeExt as _;
use commonware_consensus::aggregation::types::{Ack, Activity as AggActivity, Item, TipAck};
use commonware_consensus::types::{Epoch, Height};
use commonware_consensus::{Automaton, Monitor, Reporter};
use commonware_p2p::{Message, Receiver};
use commonware_parallel::Sequential;
use commonware_utils::channel::{oneshot, ring};
use commonware_utils::ordered::Quorum as _;
use vyrn_wire::header::Hash;
use vyrn_wire::msg::consensus::{root_vote_digest, CertEntry};

use crate::ingress::DeskLink;
use crate::ingress::Req;
use crate::voters::Voters;
use crate::{Digest, PrivateKey, PublicKey, ROOT_NAMESPACE};

/// The aggregation signing scheme (07 §7.4: ed25519).
pub type RootScheme = commonware_consensus::aggregation::scheme::ed25519::Scheme;
/// The aggregation engine's activity stream.
pub type RootActivity = AggActivity<RootScheme, Digest>;

/// The p2p channel of the state-root aggregation (beside Simplex's three).
pub const CHANNEL_ROOTS: u64 = 3;

/// The root index of root height `h`: `(h + 1) / root_blocks − 1` (None: not a root height).
pub fn root_index(h: u64, root_blocks: u64) -> Option<u64> {
    vyrn_wire::msg::consensus::is_root_height(h, root_blocks).then(|| (h + 1) / root_blocks - 1)
}

/// The root height of root index `i`: `(i + 1) · root_blocks − 1`.
pub fn root_height(index: u64, root_blocks: u64) -> u64 {
    (index + 1).saturating_mul(root_blocks).saturating_sub(1)
}

/// What a voter signs for `R(h)` (07 §7.4), as the aggregation engine's digest.
pub fn root_digest(epoch: u32, h: u64, root: &Hash) -> Digest {
    commonware_cryptography::blake3::Digest(root_vote_digest(epoch, h, root))
}

/// A signing root scheme for the voter holding `key` in `voters` (None: not a voter).
pub fn root_signer(voters: &Voters, key: PrivateKey) -> Option<RootScheme> {
    RootScheme::signer(ROOT_NAMESPACE, voters.set().clone(), key)
}

/// A verifying root scheme over `voters`.
pub fn root_verifier(voters: &Voters) -> RootScheme {
    RootScheme::verifier(ROOT_NAMESPACE, voters.set().clone())
}

/// This voter's signature over root item `(index, digest)`, as its engine produces it
/// (ed25519 is deterministic): the desk keeps it as evidence for a `Diverge`.
pub fn sign_root(scheme: &RootScheme, epoch: u32, index: u64, digest: Digest) -> Option<[u8; 64]> {
    let ack = Ack::<RootScheme, Digest>::sign(
        scheme,
        Epoch::new(epoch as u64),
        Item {
            height: Height::new(index),
            digest,
        },
    )?;
    let s = ack.attestation.signature.get()?;
    let mut b = [0u8; 64];
    b.copy_from_slice(s.as_ref());
    Some(b)
}

/// [`sign_root`] over the raw 32 digest bytes (what a `Diverge` carries, 07 §7.4).
pub fn sign_root_bytes(
    scheme: &RootScheme,
    epoch: u32,
    index: u64,
    digest: &Hash,
) -> Option<[u8; 64]> {
    sign_root(
        scheme,
        epoch,
        index,
        commonware_cryptography::blake3::Digest(*digest),
    )
}

/// A `REP_RootCert`'s entries (membership index, signature) from an aggregation certificate.
fn entries_of(
    voters: &Voters,
    c: &commonware_consensus::aggregation::types::Certificate<RootScheme, Digest>,
) -> Option<Vec<CertEntry>> {
    let mut v = Vec::with_capacity(c.certificate.signatures.len());
    for (p, s) in c.certificate.signers.iter().zip(&c.certificate.signatures) {
        let index = voters.member(p)?;
        let sig = s.get()?;
        let mut b = [0u8; 64];
        b.copy_from_slice(sig.as_ref());
        v.push(CertEntry { index, sig: b });
    }
    v.sort_unstable_by_key(|e| e.index);
    Some(v)
}

/// The aggregation engine's automaton and reporter for one voter: every call a request to the
/// desk (bounded channel; a full channel drops the request, counted, as for Simplex).
#[derive(Debug, Clone)]
pub struct RootsApp {
    link: DeskLink,
    voters: Arc<Voters>,
}

impl RootsApp {
    /// The roots app of a voter talking to its desk through `link`.
    pub fn new(link: DeskLink, voters: Voters) -> Self {
        RootsApp {
            link,
            voters: Arc::new(voters),
        }
    }
}

impl RootsApp {
    /// Tap the aggregation engine's receiver `inner` for this voter's desk ([`AckTap`]).
    pub fn tap<R>(&self, inner: R) -> AckTap<R> {
        AckTap::new(inner, self.link.clone(), (*self.voters).clone())
    }
}

impl Automaton for RootsApp {
    type Context = Height;
    type Digest = Digest;

    async fn propose(&mut self, index: Height) -> oneshot::Receiver<Digest> {
        let (reply, rx) = oneshot::channel();
        self.link.send(Req::RootPropose {
            index: index.get(),
            reply,
        });
        rx
    }

    async fn verify(&mut self, index: Height, digest: Digest) -> oneshot::Receiver<bool> {
        let (reply, rx) = oneshot::channel();
        self.link.send(Req::RootVerify {
            index: index.get(),
            digest,
            reply,
        });
        rx
    }
}

impl Reporter for RootsApp {
    type Activity = RootActivity;

    fn report(&mut self, activity: RootActivity) -> Feedback {
        match activity {
            AggActivity::Certified(c) => {
                let Some(entries) = entries_of(&self.voters, &c) else {
                    return Feedback::Ok;
                };
                self.link.send(Req::RootCertified {
                    index: c.item.height.get(),
                    digest: c.item.digest.0,
                    entries,
                })
            }
            AggActivity::Tip(t) => self.link.send(Req::RootTip { tip: t.get() }),
            // Acks replayed from the engine's journal after a restart: the tap saw the live
            // ones (and this voter's own are the desk's).
            AggActivity::Ack(_) => Feedback::Ok,
        }
    }
}

/// The aggregation engine's epoch source: one fixed epoch per engine (07 §6.3: one engine per
/// (home, epoch)). Its senders are kept alive, or the engine would stop (guide pitfall 11).
#[derive(Debug, Clone)]
pub struct FixedEpoch {
    epoch: Epoch,
    keep: Arc<Mutex<Vec<ring::Sender<Epoch>>>>,
}

impl FixedEpoch {
    /// Always `epoch`.
    pub fn new(epoch: u32) -> Self {
        FixedEpoch {
            epoch: Epoch::new(epoch as u64),
            keep: Arc::new(Mutex::new(Vec::new())),
        }
    }
}

impl Monitor for FixedEpoch {
    type Index = Epoch;

    async fn subscribe(&mut self) -> (Epoch, ring::Receiver<Epoch>) {
        let (tx, rx) = ring::channel(NonZeroUsize::MIN);
        if let Ok(mut k) = self.keep.lock() {
            k.push(tx);
        }
        (self.epoch, rx)
    }
}

/// The aggregation engine's receiver, tapped: each message still goes to the engine unchanged;
/// an ack whose signer is its sender and whose signature verifies is also handed to the desk
/// (divergence needs the acks for other digests, which the engine drops).
#[derive(Debug)]
pub struct AckTap<R> {
    inner: R,
    link: DeskLink,
    voters: Arc<Voters>,
    verifier: RootScheme,
    epoch: Epoch,
}

impl<R> AckTap<R> {
    /// Tap `inner` for the voter set `voters`, handing acks to the desk through `link`.
    pub fn new(inner: R, link: DeskLink, voters: Voters) -> Self {
        let verifier = root_verifier(&voters);
        let epoch = Epoch::new(voters.epoch() as u64);
        AckTap {
            inner,
            link,
            voters: Arc::new(voters),
            verifier,
            epoch,
        }
    }

    fn inspect(&self, sender: &PublicKey, msg: &commonware_runtime::IoBuf) {
        let Ok(t) = TipAck::<RootScheme, Digest>::decode(msg.clone()) else {
            return;
        };
        let ack = t.ack;
        if ack.epoch != self.epoch
            || self.voters.set().index(sender) != Some(ack.attestation.signer)
        {
            return;
        }
        if !ack.verify(&mut rand::rng(), &self.verifier, &Sequential) {
            return;
        }
        let (Some(signer), Some(sig)) = (
            self.voters.member(ack.attestation.signer),
            ack.attestation.signature.get(),
        ) else {
            return;
        };
        let mut b = [0u8; 64];
        b.copy_from_slice(sig.as_ref());
        self.link.send(Req::RootAck {
            index: ack.item.height.get(),
            signer,
            digest: ack.item.digest.0,
            sig: b,
        });
    }
}

impl<R: Receiver<PublicKey = PublicKey>> Receiver for AckTap<R> {
    type Error = R::Error;
    type PublicKey = PublicKey;

    async fn recv(&mut self) -> Result<Message<PublicKey>, Self::Error> {
        let m = self.inner.recv().await?;
        self.inspect(&m.0, &m.1);
        Ok(m)
    }

    fn capacity(&self) -> NonZeroUsize {
        self.inner.capacity()
    }
}

/// The aggregation configuration of 07 §7.4 for one voter.
pub type RootsConfig<B> = commonware_consensus::aggregation::Config<
    commonware_cryptography::certificate::ConstantProvider<RootScheme, Epoch>,
    Digest,
    RootsApp,
    RootsApp,
    FixedEpoch,
    B,
    Sequential,
>;

/// Build the aggregation engine's configuration: `window` root indices requested ahead (the
/// desk answers each once replay reaches it), acks rebroadcast every `rebroadcast`.
pub fn config<B: commonware_p2p::Blocker<PublicKey = PublicKey>>(
    scheme: RootScheme,
    blocker: B,
    app: RootsApp,
    epoch: u32,
    partition: String,
    rebroadcast: std::time::Duration,
) -> RootsConfig<B> {
    use commonware_runtime::buffer::paged::CacheRef;
    use commonware_utils::{NZUsize, NZU16};
    commonware_consensus::aggregation::Config {
        monitor: FixedEpoch::new(epoch),
        provider: commonware_cryptography::certificate::ConstantProvider::new(scheme),
        automaton: app.clone(),
        reporter: app,
        blocker,
        priority_acks: false,
        rebroadcast_timeout: commonware_utils::NonZeroDuration::new(
            rebroadcast.max(std::time::Duration::from_millis(1)),
        )
        .unwrap_or_else(|| unreachable!("a positive duration")),
        epoch_bounds: (
            commonware_consensus::types::EpochDelta::new(0),
            commonware_consensus::types::EpochDelta::new(0),
        ),
        window: std::num::NonZeroU64::new(4).unwrap_or(std::num::NonZeroU64::MIN),
        activity_timeout: commonware_consensus::types::HeightDelta::new(64),
        journal_partition: partition,
        journal_write_buffer: NZUsize!(4096),
        journal_replay_buffer: NZUsize!(4096),
        journal_heights_per_section: std::num::NonZeroU64::new(16)
            .unwrap_or(std::num::NonZeroU64::MIN),
        journal_compression: None,
        journal_page_cache: CacheRef::new(NZU16!(4096), NZUsize!(16)),
        strategy: Sequential,
    }
}

/// The largest message the roots channel carries.
pub fn max_message_size() -> u32 {
    commonware_p2p::max_message_size(&[commonware_consensus::aggregation::max_payload_size::<
        RootScheme,
        Digest,
    >()])
}

/// Why a `REP_RootCert` is refused ([`verify_root_cert`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RootCertErr {
    /// The certificate's epoch is not the voter set's.
    Epoch,
    /// `h` is not a root height.
    NotRootHeight,
    /// Entries not strictly ascending (a duplicate signer included).
    Order,
    /// Fewer entries than Q.
    TooFew,
    /// An entry's signature does not verify (the first bad index).
    BadSignature(u8),
}

impl std::fmt::Display for RootCertErr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RootCertErr::Epoch => write!(f, "the certificate's epoch is not the voters'"),
            RootCertErr::NotRootHeight => write!(f, "h is not a root height"),
            RootCertErr::Order => write!(f, "entries are not in strictly ascending voter order"),
            RootCertErr::TooFew => write!(f, "fewer signatures than Q"),
            RootCertErr::BadSignature(i) => write!(f, "voter {i}'s root signature does not verify"),
        }
    }
}

impl std::error::Error for RootCertErr {}

/// Check a `REP_RootCert` (07 §7.4) against `voters` with REP_ROOT_BLOCKS = `root_blocks`: a
/// root height, the voters' epoch, at least Q strictly ascending entries, and each one that
/// voter's aggregation signature over item `(index, BLAKE3("vyrn v1 root" ‖ epoch ‖ h ‖ R(h)))`
/// under namespace `b"vyrn-v1-root"`.
pub fn verify_root_cert(
    cert: &vyrn_wire::msg::consensus::RepRootCert,
    voters: &Voters,
    root_blocks: u64,
) -> Result<(), RootCertErr> {
    if cert.epoch != voters.epoch() {
        return Err(RootCertErr::Epoch);
    }
    let index = root_index(cert.h, root_blocks).ok_or(RootCertErr::NotRootHeight)?;
    if !cert.entries.windows(2).all(|w| w[0].index < w[1].index) {
        return Err(RootCertErr::Order);
    }
    if cert.entries.len() < voters.quorum() {
        return Err(RootCertErr::TooFew);
    }
    let item = Item {
        height: Height::new(index),
        digest: root_digest(cert.epoch, cert.h, &cert.root),
    };
    let verifier = root_verifier(voters);
    for e in &cert.entries {
        if !root_sig_ok(voters, &verifier, &item, e) {
            return Err(RootCertErr::BadSignature(e.index));
        }
    }
    Ok(())
}

/// Whether `e` is its voter's aggregation signature over root item `item`.
fn root_sig_ok(voters: &Voters, verifier: &RootScheme, item: &Item<Digest>, e: &CertEntry) -> bool {
    use commonware_codec::types::lazy::Lazy;
    use commonware_codec::DecodeFixed as _;
    use commonware_cryptography::certificate::{Attestation, Scheme as _};
    let att = voters.participant(e.index).and_then(|signer| {
        let sig = commonware_cryptography::ed25519::Signature::decode_fixed(e.sig).ok()?;
        Some(Attestation::<RootScheme> {
            signer,
            signature: Lazy::from(sig),
        })
    });
    let Some(att) = att else {
        return false;
    };
    !verifier
        .verify_attestations::<_, Digest, _>(&mut rand::rng(), item, vec![att], &Sequential)
        .verified
        .is_empty()
}

/// Why a `Diverge` does not halt the book (07 §7.4, INV-REP-9): its evidence is checked first
/// (security review F3: one unsigned 15-byte `Diverge` halted the book forever).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DivergeErr {
    /// Another epoch than the voters'.
    Epoch,
    /// Case 1 with fewer than two distinct digests carrying f + 1 valid signatures each.
    NotAConflict,
    /// A digest's entries are not strictly ascending (a signer twice).
    Order,
    /// An entry's signature does not verify (the voter index).
    BadSignature(u8),
    /// Case 2 from fewer than f + 1 distinct voters so far: counted, not acted on.
    TimeoutPending,
}

impl std::fmt::Display for DivergeErr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DivergeErr::Epoch => write!(f, "another epoch"),
            DivergeErr::NotAConflict => {
                write!(f, "fewer than two digests with f + 1 valid signatures")
            }
            DivergeErr::Order => write!(f, "entries not strictly ascending"),
            DivergeErr::BadSignature(i) => write!(f, "voter {i}'s root signature does not verify"),
            DivergeErr::TimeoutPending => write!(f, "a timeout from fewer than f + 1 voters"),
        }
    }
}

impl std::error::Error for DivergeErr {}

/// Check a `Diverge`'s case-1 evidence (07 §7.4): at least two distinct digests for its index,
/// each with at least f + 1 signatures, every signature that voter's aggregation signature over
/// item `(index, digest)` under `b"vyrn-v1-root"`. The item binds the index, so signatures of
/// another index cannot be replayed as evidence for this one.
pub fn verify_conflict(
    d: &vyrn_wire::msg::ctrl::Diverge,
    voters: &Voters,
) -> Result<(), DivergeErr> {
    if d.epoch != voters.epoch() {
        return Err(DivergeErr::Epoch);
    }
    let f1 = voters.max_faults() + 1;
    let verifier = root_verifier(voters);
    let mut heavy: Vec<&Hash> = Vec::new();
    for dg in &d.digests {
        if !dg.sigs.windows(2).all(|w| w[0].index < w[1].index) {
            return Err(DivergeErr::Order);
        }
        if dg.sigs.len() < f1 || heavy.contains(&&dg.digest) {
            continue;
        }
        let item = Item {
            height: Height::new(d.index),
            digest: commonware_cryptography::blake3::Digest(dg.digest),
        };
        for e in &dg.sigs {
            if !root_sig_ok(voters, &verifier, &item, e) {
                return Err(DivergeErr::BadSignature(e.index));
            }
        }
        heavy.push(&dg.digest);
    }
    if heavy.len() < 2 {
        return Err(DivergeErr::NotAConflict);
    }
    Ok(())
}

/// Root indexes whose timeout reports the sequencer remembers at once: one per voter (its
/// latest), so at most n ≤ MAX_MEMBERS = this.
pub const DIVERGE_TIMEOUTS_MAX: usize = vyrn_wire::msg::MAX_MEMBERS;

/// The sequencer's gate on `Diverge` (07 §7.4, INV-REP-9): case 1 halts on verified evidence
/// from any voter ([`verify_conflict`]); case 2, a timeout, which no signature can prove, halts
/// once f + 1 distinct voters report it for the same index — more than the f a Byzantine set
/// holds. Bounded: each voter's latest timeout index only, so a flood of indexes from one voter
/// replaces its own report and never another's (it once evicted the oldest index, an honest
/// voter's pending report included).
#[derive(Debug)]
pub struct DivergeGate {
    voters: Voters,
    /// Per voter: the root index of its latest timeout report.
    timeouts: Vec<Option<u64>>,
}

impl DivergeGate {
    /// A gate over `voters`.
    pub fn new(voters: Voters) -> Self {
        let n = voters.n().min(DIVERGE_TIMEOUTS_MAX);
        DivergeGate {
            voters,
            timeouts: vec![None; n],
        }
    }

    /// Voter `voter`'s `Diverge`: `Ok(index)` when the book must halt.
    pub fn on_diverge(
        &mut self,
        voter: usize,
        d: &vyrn_wire::msg::ctrl::Diverge,
    ) -> Result<u64, DivergeErr> {
        use vyrn_wire::msg::ctrl::DivergeReason;
        if d.epoch != self.voters.epoch() {
            return Err(DivergeErr::Epoch);
        }
        match d.reason {
            DivergeReason::Conflict => verify_conflict(d, &self.voters).map(|()| d.index),
            DivergeReason::Timeout => {
                let Some(slot) = self.timeouts.get_mut(voter) else {
                    return Err(DivergeErr::TimeoutPending);
                };
                *slot = Some(d.index);
                let seen = self
                    .timeouts
                    .iter()
                    .filter(|t| **t == Some(d.index))
                    .count();
                if seen > self.voters.max_faults() {
                    Ok(d.index)
                } else {
                    Err(DivergeErr::TimeoutPending)
                }
            }
        }
    }
}
