//! The member envelope (a project addition; security review F9): every control
//! message one member of a home sends another — RepAck, Nack, RepairReq, DataFetch,
//! PeerDataFetch, DataDown, DataRedirect, HashListReq, SeqDataReq, the finality votes and
//! certificates, and the box's HashList and SeqData answers — travels inside a [`SEALED`]
//! envelope, so a datagram with a spoofed source address is refused before it is parsed.
//!
//! ```text
//! 0      type     u8    SEALED (0xE0)
//! 1      from     u8    the sender (see [`from`])
//! 2      seq      u64   LE, the sender's sequence number: its start time in ns, +1 per message
//! 10     body     ...   the control message, exactly as sent without the envelope
//! end-16 tag      16 B  BLAKE3 keyed by the link key over epoch (u32 LE) ‖ bytes 0..end-16
//! ```
//!
//! The link key of two members is agreed, never configured: X25519 between the sender's
//! Ed25519 identity (a voter's `vote_key`, the box's `seq_key`, a data box's or the
//! standby's `link_key`) and the receiver's, each converted to its Montgomery form (what
//! libsodium's `crypto_sign_ed25519_*_to_curve25519` does), hashed with both public keys by
//! BLAKE3's `derive_key`. A member holds a key only for the links it is an end of: a Byzantine
//! voter cannot seal as another voter.
//!
//! Replays: a receiver keeps, per sender, the highest `seq` it took and a 128-bit window below
//! it ([`ReplayWindow`]); a `seq` taken before or older than the window is refused. The epoch is
//! under the tag, so a message of one epoch never verifies in another (the tenure joins it when
//! tenures change, 07 §2.2). A sender starts its numbers at its wall clock in ns, so a restarted
//! member continues above what it sent before.
//!
//! Frames (ORDER, HASH, HEADER, retransmitted or peer-repaired) are not sealed: their block's
//! `order_root` under the header's `seq_sig` authenticates them (07 §3.1, §4.10), and
//! `NackTooOld` carries the box's signature.

use ed25519_dalek::{SigningKey, VerifyingKey};

/// The envelope's type byte (project addition; no 07 control type uses it).
pub const SEALED: u8 = 0xE0;
/// Bytes before the body: type, from, seq.
pub const SEAL_HDR: usize = 10;
/// Bytes of the tag after the body.
pub const SEAL_TAG: usize = 16;
/// Bytes the envelope adds to a message.
pub const SEAL_OVERHEAD: usize = SEAL_HDR + SEAL_TAG;
/// The replay window below a sender's highest `seq` (bits).
pub const REPLAY_WINDOW: u64 = 128;

/// The link key's BLAKE3 `derive_key` context.
const LINK_CONTEXT: &str = "vyrn v1 2026-12 member link key";

/// Sender ids (`from`). A member that seals on several threads has one id per thread, so
/// each id's numbers only grow.
pub mod from {
    /// Voter `i` is `i` (`0..MAX_MEMBERS`).
    pub const fn voter(i: usize) -> u8 {
        i as u8
    }
    /// The sequencer box's hasher tile (HashList parts, 07 §5.6).
    pub const BOX_HASHER: u8 = 0x80;
    /// The sequencer box's control receive tile (SeqData answers, 07 §5.5).
    pub const BOX_CTRL: u8 = 0x81;
    /// Data box `d` is `0x90 + d`.
    pub const fn databox(d: u8) -> u8 {
        0x90u8.wrapping_add(d)
    }
    /// The warm standby.
    pub const STANDBY: u8 = 0xA0;
}

/// Why a datagram was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SealErr {
    /// It is not an envelope (a member's control message must be sealed).
    NotSealed,
    /// Shorter than an empty envelope.
    Short,
    /// `from` names no sender this receiver holds a link key for (or not the one the source
    /// address is).
    UnknownSender,
    /// The tag does not verify.
    BadTag,
    /// The `seq` was taken before, or is older than the window.
    Replayed,
}

impl SealErr {
    /// Stable lower-case name, for counters and logs.
    pub const fn name(self) -> &'static str {
        match self {
            SealErr::NotSealed => "not_sealed",
            SealErr::Short => "short",
            SealErr::UnknownSender => "unknown_sender",
            SealErr::BadTag => "bad_tag",
            SealErr::Replayed => "replayed",
        }
    }
}

/// The symmetric key of one link between two members (wiped on drop).
#[derive(Clone)]
pub struct LinkKey([u8; 32]);

impl core::fmt::Debug for LinkKey {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("LinkKey(..)")
    }
}

impl Drop for LinkKey {
    fn drop(&mut self) {
        use zeroize::Zeroize;
        self.0.zeroize();
    }
}

impl LinkKey {
    /// The key `mine` shares with the holder of `theirs` (the same on both ends); `None` when
    /// the exchange gives the identity (a small-order key: the home file refuses those).
    pub fn agree(mine: &SigningKey, theirs: &VerifyingKey) -> Option<LinkKey> {
        let shared = theirs.to_montgomery() * mine.to_scalar();
        let mut dh = shared.to_bytes();
        if dh == [0u8; 32] {
            return None;
        }
        let (a, b) = (mine.verifying_key().to_bytes(), theirs.to_bytes());
        let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
        let mut h = blake3::Hasher::new_derive_key(LINK_CONTEXT);
        h.update(&dh);
        h.update(&lo);
        h.update(&hi);
        use zeroize::Zeroize;
        dh.zeroize();
        Some(LinkKey(*h.finalize().as_bytes()))
    }

    /// A key from its bytes (tests and golden vectors).
    pub fn from_bytes(k: [u8; 32]) -> LinkKey {
        LinkKey(k)
    }

    fn tag(&self, epoch: u32, signed: &[u8]) -> [u8; SEAL_TAG] {
        let mut h = blake3::Hasher::new_keyed(&self.0);
        h.update(&epoch.to_le_bytes());
        h.update(signed);
        let mut t = [0u8; SEAL_TAG];
        t.copy_from_slice(&h.finalize().as_bytes()[..SEAL_TAG]);
        t
    }
}

/// Append a sealed message to `out`: the header, what `body` writes, the tag. When `body`
/// returns false (the message did not encode) `out` is left as it was and false returned.
pub fn seal_into(
    out: &mut Vec<u8>,
    key: &LinkKey,
    epoch: u32,
    from: u8,
    seq: u64,
    body: impl FnOnce(&mut Vec<u8>) -> bool,
) -> bool {
    let start = out.len();
    out.push(SEALED);
    out.push(from);
    out.extend_from_slice(&seq.to_le_bytes());
    if !body(out) {
        out.truncate(start);
        return false;
    }
    let t = key.tag(epoch, &out[start..]);
    out.extend_from_slice(&t);
    true
}

/// A parsed envelope, not yet verified.
#[derive(Debug, Clone, Copy)]
pub struct Sealed<'a> {
    /// The sender id.
    pub from: u8,
    /// The sender's sequence number.
    pub seq: u64,
    /// The control message inside.
    pub body: &'a [u8],
    signed: &'a [u8],
    tag: &'a [u8],
}

impl<'a> Sealed<'a> {
    /// Whether `b` is an envelope at all (its first byte).
    pub fn is_sealed(b: &[u8]) -> bool {
        b.first() == Some(&SEALED)
    }

    /// Split an envelope (no key needed; nothing is trusted yet).
    pub fn parse(b: &'a [u8]) -> Result<Sealed<'a>, SealErr> {
        if !Self::is_sealed(b) {
            return Err(SealErr::NotSealed);
        }
        if b.len() < SEAL_OVERHEAD {
            return Err(SealErr::Short);
        }
        let end = b.len() - SEAL_TAG;
        let mut seq = [0u8; 8];
        seq.copy_from_slice(&b[2..SEAL_HDR]);
        Ok(Sealed {
            from: b[1],
            seq: u64::from_le_bytes(seq),
            body: &b[SEAL_HDR..end],
            signed: &b[..end],
            tag: &b[end..],
        })
    }

    /// Whether the tag verifies under `key` in `epoch` (constant time in the tag).
    pub fn verify(&self, key: &LinkKey, epoch: u32) -> bool {
        let t = key.tag(epoch, self.signed);
        let mut d = 0u8;
        for (a, b) in t.iter().zip(self.tag) {
            d |= a ^ b;
        }
        d == 0
    }
}

/// A receiver's replay state for one sender: the highest `seq` taken and which of the
/// [`REPLAY_WINDOW`] numbers below it were taken (the anti-replay window of RFC 4303 §3.4.3).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReplayWindow {
    top: u64,
    bits: u128,
}

impl ReplayWindow {
    /// Whether `seq` is fresh; if so it is marked taken. Call it only after the tag verified.
    pub fn accept(&mut self, seq: u64) -> bool {
        if self.bits == 0 || seq > self.top {
            let shift = if self.bits == 0 {
                REPLAY_WINDOW
            } else {
                seq - self.top
            };
            self.bits = if shift >= REPLAY_WINDOW {
                0
            } else {
                self.bits << shift
            };
            self.bits |= 1;
            self.top = seq;
            return true;
        }
        let d = self.top - seq;
        if d >= REPLAY_WINDOW {
            return false;
        }
        let m = 1u128 << d;
        if self.bits & m != 0 {
            return false;
        }
        self.bits |= m;
        true
    }

    /// The highest `seq` taken (0 before any).
    pub fn top(&self) -> u64 {
        self.top
    }
}

/// A sender: its id, the epoch and its next sequence number.
#[derive(Debug, Clone)]
pub struct Sealer {
    from: u8,
    epoch: u32,
    next: u64,
}

impl Sealer {
    /// A sender `from` in `epoch` whose first number is `start` (its wall clock in ns).
    pub fn new(from: u8, epoch: u32, start: u64) -> Sealer {
        Sealer {
            from,
            epoch,
            next: start.max(1),
        }
    }

    /// Seal one message to the holder of `key` ([`seal_into`]).
    pub fn seal(
        &mut self,
        out: &mut Vec<u8>,
        key: &LinkKey,
        body: impl FnOnce(&mut Vec<u8>) -> bool,
    ) -> bool {
        let ok = seal_into(out, key, self.epoch, self.from, self.next, body);
        if ok {
            self.next = self.next.wrapping_add(1);
        }
        ok
    }

    /// Seal `body` as bytes.
    pub fn seal_bytes(&mut self, key: &LinkKey, body: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(body.len() + SEAL_OVERHEAD);
        self.seal(&mut out, key, |o| {
            o.extend_from_slice(body);
            true
        });
        out
    }

    /// This sender's id.
    pub fn from(&self) -> u8 {
        self.from
    }
}

/// A receiver: a link key and a replay window per sender id it takes messages from.
#[derive(Debug, Clone, Default)]
pub struct Opener {
    epoch: u32,
    links: Vec<(u8, LinkKey, ReplayWindow)>,
}

impl Opener {
    /// A receiver in `epoch` that takes messages from no one yet.
    pub fn new(epoch: u32) -> Opener {
        Opener {
            epoch,
            links: Vec::new(),
        }
    }

    /// Take messages from sender `from` under `key` (replaces an earlier key for it).
    pub fn add(&mut self, from: u8, key: LinkKey) {
        self.links.retain(|l| l.0 != from);
        self.links.push((from, key, ReplayWindow::default()));
    }

    /// Open `b`: it must be an envelope from a sender this receiver knows, with a tag that
    /// verifies and a fresh `seq`; returns the sender and the message inside.
    pub fn open<'a>(&mut self, b: &'a [u8]) -> Result<(u8, &'a [u8]), SealErr> {
        let s = Sealed::parse(b)?;
        let link = self
            .links
            .iter_mut()
            .find(|l| l.0 == s.from)
            .ok_or(SealErr::UnknownSender)?;
        if !s.verify(&link.1, self.epoch) {
            return Err(SealErr::BadTag);
        }
        if !link.2.accept(s.seq) {
            return Err(SealErr::Replayed);
        }
        Ok((s.from, s.body))
    }

    /// [`Opener::open`], and the sender must be `want` (the member the source address is).
    pub fn open_from<'a>(&mut self, want: u8, b: &'a [u8]) -> Result<&'a [u8], SealErr> {
        if Sealed::parse(b)?.from != want {
            return Err(SealErr::UnknownSender);
        }
        self.open(b).map(|x| x.1)
    }
}

std::thread_local! {
    static SIM_START: std::cell::Cell<Option<u64>> = const { std::cell::Cell::new(None) };
}

/// The simulator's stand-in for the wall clock of [`start_seq`] on this thread (`vyrn-sim`:
/// one seed, one run, byte for byte); `None` restores the wall clock. A simulator restarting a
/// member sets a later value first, as the wall clock would have moved on.
pub fn set_sim_start_seq(ns: Option<u64>) {
    SIM_START.with(|c| c.set(ns));
}

/// A sender's first sequence number: the wall clock in ns (so a restarted member continues
/// above what it sent before). The one clock read of this module, for the roles to call.
pub fn start_seq() -> u64 {
    if let Some(ns) = SIM_START.with(std::cell::Cell::get) {
        return ns;
    }
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(b: u8) -> SigningKey {
        SigningKey::from_bytes(&[b; 32])
    }

    #[test]
    fn both_ends_agree_on_one_key_and_a_third_member_gets_another() {
        let (a, b, c) = (key(1), key(2), key(3));
        let ab = LinkKey::agree(&a, &b.verifying_key()).unwrap();
        let ba = LinkKey::agree(&b, &a.verifying_key()).unwrap();
        let ac = LinkKey::agree(&a, &c.verifying_key()).unwrap();
        assert_eq!(ab.0, ba.0);
        assert_ne!(ab.0, ac.0);
        let cb = LinkKey::agree(&c, &b.verifying_key()).unwrap();
        assert_ne!(ab.0, cb.0, "c cannot compute a and b's key from its own");
    }

    #[test]
    fn a_sealed_message_opens_once_and_a_changed_byte_never() {
        let k = LinkKey::from_bytes([7; 32]);
        let mut s = Sealer::new(2, 1, 1000);
        let m = s.seal_bytes(&k, &[0x01, 1, 2, 3]);
        assert_eq!(m.len(), 4 + SEAL_OVERHEAD);
        let mut o = Opener::new(1);
        o.add(2, k.clone());
        assert_eq!(o.open(&m), Ok((2, &[0x01u8, 1, 2, 3][..])));
        assert_eq!(o.open(&m), Err(SealErr::Replayed));
        for i in 0..m.len() {
            let mut x = m.clone();
            x[i] ^= 0x10;
            let mut o = Opener::new(1);
            o.add(2, k.clone());
            o.add(0x12, k.clone());
            assert!(o.open(&x).is_err(), "byte {i} flipped still opened");
        }
        let mut other_epoch = Opener::new(2);
        other_epoch.add(2, k.clone());
        assert_eq!(other_epoch.open(&m), Err(SealErr::BadTag));
        let mut o = Opener::new(1);
        o.add(2, k);
        assert_eq!(o.open_from(3, &m), Err(SealErr::UnknownSender));
        assert_eq!(o.open(&m[..5]), Err(SealErr::Short));
        assert_eq!(o.open(&[0x01, 0, 0]), Err(SealErr::NotSealed));
    }

    #[test]
    fn the_window_takes_reordered_numbers_once_and_refuses_old_ones() {
        let mut w = ReplayWindow::default();
        assert!(w.accept(1_000));
        assert!(w.accept(1_002));
        assert!(w.accept(1_001));
        assert!(!w.accept(1_001));
        assert!(!w.accept(1_002));
        assert!(w.accept(1_002 + REPLAY_WINDOW - 1 - 2));
        assert!(w.accept(5_000));
        assert!(!w.accept(5_000 - REPLAY_WINDOW));
        assert!(w.accept(5_000 - REPLAY_WINDOW + 1));
        assert!(!w.accept(1_001));
        assert_eq!(w.top(), 5_000);
    }

    #[test]
    fn golden_envelope() {
        // docs/wire-messages.md "Member envelope": a RepAck body under key [0x11; 32], epoch 1.
        let k = LinkKey::from_bytes([0x11; 32]);
        let body = [0x01u8, 0xAA];
        let mut out = Vec::new();
        assert!(seal_into(&mut out, &k, 1, 3, 0x0102030405060708, |o| {
            o.extend_from_slice(&body);
            true
        }));
        assert_eq!(&out[..12], &[0xE0, 3, 8, 7, 6, 5, 4, 3, 2, 1, 0x01, 0xAA]);
        let mut h = blake3::Hasher::new_keyed(&[0x11; 32]);
        h.update(&1u32.to_le_bytes());
        h.update(&out[..12]);
        assert_eq!(&out[12..], &h.finalize().as_bytes()[..16]);
        assert_eq!(
            &out[12..],
            &[
                0x6a, 0x1c, 0xf7, 0x9b, 0xac, 0xb6, 0xeb, 0xd6, 0x0c, 0xc0, 0x9d, 0x89, 0x7c, 0xa7,
                0xd5, 0xe4
            ]
        );
    }
}
