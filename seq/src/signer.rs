//! The resumable, sliced Ed25519 signer for `seq_sig` (07 §6.2): stream-A signs each HEADER
//! between its frame work, a slice at a time, so a signature never holds the gate. The output is
//! byte-identical to RFC 8032 (tested against its vectors and ed25519-dalek).
//!
//! A signature is: `r = SHA-512(prefix ‖ M) mod L`, `R = r·B`, `k = SHA-512(R ‖ A ‖ M) mod L`,
//! `S = r + k·a mod L`, `sig = R ‖ S`. Slices, in order:
//! 1. one SHA-512 compression per slice (the `r` hash, then the `k` hash), `sha2::compress512`;
//! 2. `R = r·B` as 64 radix-16 signed digits, one constant-time table select (all 8 entries,
//!    `subtle`) and one point addition per slice, over a table of `j·16^i·B` built at key load;
//! 3. `R`'s encoding (one field inversion, the longest slice: ed25519-dalek's field arithmetic is
//!    not public, so it cannot be cut finer here);
//! 4. `S`.
//!
//! The key is expanded once at load (`SigningKey` seed → `a`, `prefix`, `A`) and never written.
//! Why hand-written: ed25519-dalek signs in one call (≈ tens of µs), which would stall a stream
//! core; no maintained crate offers a resumable signer (`docs/seq.md`).

use curve25519_dalek::constants::ED25519_BASEPOINT_POINT;
use curve25519_dalek::edwards::EdwardsPoint;
use curve25519_dalek::scalar::Scalar;
use curve25519_dalek::traits::Identity;
use sha2::Digest;
use subtle::{ConditionallySelectable, ConstantTimeEq};

const BLOCK: usize = 128;
/// The longest message a slice-able signature takes (a HEADER's signing message is 139 bytes).
pub const SIGN_MSG_MAX: usize = 256;

const H0: [u64; 8] = [
    0x6a09e667f3bcc908,
    0xbb67ae8584caa73b,
    0x3c6ef372fe94f82b,
    0xa54ff53a5f1d36f1,
    0x510e527fade682d1,
    0x9b05688c2b3e6c1f,
    0x1f83d9abfb41bd6b,
    0x5be0cd19137e2179,
];

/// A SHA-512 over a message laid out in whole padded blocks, compressed one block per step.
#[derive(Clone)]
struct Sha {
    state: [u64; 8],
    buf: [u8; SIGN_MSG_MAX + 64 + 2 * BLOCK],
    blocks: usize,
    next: usize,
}

impl Sha {
    fn new(parts: &[&[u8]]) -> Self {
        let mut buf = [0u8; SIGN_MSG_MAX + 64 + 2 * BLOCK];
        let mut n = 0;
        for p in parts {
            buf[n..n + p.len()].copy_from_slice(p);
            n += p.len();
        }
        let bits = (n as u128) * 8;
        buf[n] = 0x80;
        let blocks = (n + 1 + 16).div_ceil(BLOCK);
        let end = blocks * BLOCK;
        buf[end - 16..end].copy_from_slice(&bits.to_be_bytes());
        Sha {
            state: H0,
            buf,
            blocks,
            next: 0,
        }
    }

    /// One compression; true when done.
    fn step(&mut self) -> bool {
        let b = self.next * BLOCK;
        let block = sha2::digest::generic_array::GenericArray::from_slice(&self.buf[b..b + BLOCK]);
        sha2::compress512(&mut self.state, core::slice::from_ref(block));
        self.next += 1;
        self.next == self.blocks
    }

    fn digest(&self) -> [u8; 64] {
        let mut out = [0u8; 64];
        for (i, w) in self.state.iter().enumerate() {
            out[8 * i..8 * i + 8].copy_from_slice(&w.to_be_bytes());
        }
        out
    }
}

#[derive(Clone)]
enum Phase {
    Idle,
    HashR(Box<Sha>),
    MulR {
        digits: [i8; 64],
        i: usize,
        acc: EdwardsPoint,
        r: Scalar,
    },
    Encode {
        acc: EdwardsPoint,
        r: Scalar,
    },
    HashK {
        sha: Box<Sha>,
        r: Scalar,
        big_r: [u8; 32],
    },
    Done([u8; 64]),
}

/// The sliced signer.
pub struct SlicedSigner {
    a: Scalar,
    prefix: [u8; 32],
    public: [u8; 32],
    table: Vec<[EdwardsPoint; 8]>,
    msg: [u8; SIGN_MSG_MAX],
    len: usize,
    phase: Phase,
    slices: u64,
}

impl std::fmt::Debug for SlicedSigner {
    // The key is secret: never printed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlicedSigner")
            .field("public", &self.public)
            .finish_non_exhaustive()
    }
}

fn radix16(s: &Scalar) -> [i8; 64] {
    let b = s.to_bytes();
    let mut e = [0i8; 64];
    for i in 0..32 {
        e[2 * i] = (b[i] & 15) as i8;
        e[2 * i + 1] = ((b[i] >> 4) & 15) as i8;
    }
    // Signed digits in [-8, 8): r < 2^253, so the top digit stays ≤ 8.
    for i in 0..63 {
        let carry = (e[i] + 8) >> 4;
        e[i] -= carry << 4;
        e[i + 1] += carry;
    }
    e
}

impl SlicedSigner {
    /// Load a key from its 32-byte seed (RFC 8032 §5.1.5): expand once, build the table.
    pub fn new(seed: &[u8; 32]) -> Self {
        let h: [u8; 64] = sha2::Sha512::digest(seed).into();
        let mut a_bytes = [0u8; 32];
        a_bytes.copy_from_slice(&h[..32]);
        a_bytes[0] &= 248;
        a_bytes[31] &= 127;
        a_bytes[31] |= 64;
        let a = Scalar::from_bytes_mod_order(a_bytes);
        let mut prefix = [0u8; 32];
        prefix.copy_from_slice(&h[32..]);
        let public = EdwardsPoint::mul_base_clamped(a_bytes)
            .compress()
            .to_bytes();
        let mut table = Vec::with_capacity(64);
        let mut base = ED25519_BASEPOINT_POINT;
        for _ in 0..64 {
            let mut row = [EdwardsPoint::identity(); 8];
            let mut p = base;
            for slot in row.iter_mut() {
                *slot = p;
                p += base;
            }
            table.push(row);
            // base ·= 16
            for _ in 0..4 {
                base = base + base;
            }
        }
        SlicedSigner {
            a,
            prefix,
            public,
            table,
            msg: [0; SIGN_MSG_MAX],
            len: 0,
            phase: Phase::Idle,
            slices: 0,
        }
    }

    /// The public key `A`.
    pub fn public(&self) -> [u8; 32] {
        self.public
    }

    /// Whether a signature is in progress.
    pub fn busy(&self) -> bool {
        !matches!(self.phase, Phase::Idle | Phase::Done(_))
    }

    /// Start signing `msg` (≤ SIGN_MSG_MAX bytes). Refused while busy.
    pub fn start(&mut self, msg: &[u8]) -> bool {
        if self.busy() || msg.len() > SIGN_MSG_MAX {
            return false;
        }
        self.msg[..msg.len()].copy_from_slice(msg);
        self.len = msg.len();
        self.phase = Phase::HashR(Box::new(Sha::new(&[&self.prefix, msg])));
        true
    }

    /// Forget a finished signature (the signer is idle again).
    pub fn reset(&mut self) {
        if matches!(self.phase, Phase::Done(_)) {
            self.phase = Phase::Idle;
        }
    }

    /// Slices run so far (all signatures).
    pub fn slices(&self) -> u64 {
        self.slices
    }

    /// Run one slice. Returns the signature when the last slice finishes it.
    pub fn step(&mut self) -> Option<[u8; 64]> {
        self.slices += 1;
        let phase = std::mem::replace(&mut self.phase, Phase::Idle);
        self.phase = match phase {
            Phase::Idle => Phase::Idle,
            Phase::Done(s) => return Some(s),
            Phase::HashR(mut sha) => {
                if sha.step() {
                    let r = Scalar::from_bytes_mod_order_wide(&sha.digest());
                    Phase::MulR {
                        digits: radix16(&r),
                        i: 0,
                        acc: EdwardsPoint::identity(),
                        r,
                    }
                } else {
                    Phase::HashR(sha)
                }
            }
            Phase::MulR {
                digits,
                i,
                mut acc,
                r,
            } => {
                let d = digits[i];
                let neg = subtle::Choice::from((d < 0) as u8);
                let m = d.unsigned_abs();
                let mut sel = EdwardsPoint::identity();
                for (j, p) in self.table[i].iter().enumerate() {
                    sel.conditional_assign(p, (j as u8 + 1).ct_eq(&m));
                }
                let negated = -sel;
                sel.conditional_assign(&negated, neg);
                acc += sel;
                if i == 63 {
                    Phase::Encode { acc, r }
                } else {
                    Phase::MulR {
                        digits,
                        i: i + 1,
                        acc,
                        r,
                    }
                }
            }
            Phase::Encode { acc, r } => {
                let big_r = acc.compress().to_bytes();
                let sha = Sha::new(&[&big_r, &self.public, &self.msg[..self.len]]);
                Phase::HashK {
                    sha: Box::new(sha),
                    r,
                    big_r,
                }
            }
            Phase::HashK { mut sha, r, big_r } => {
                if sha.step() {
                    let k = Scalar::from_bytes_mod_order_wide(&sha.digest());
                    let s = k * self.a + r;
                    let mut sig = [0u8; 64];
                    sig[..32].copy_from_slice(&big_r);
                    sig[32..].copy_from_slice(&s.to_bytes());
                    self.phase = Phase::Done(sig);
                    return Some(sig);
                } else {
                    Phase::HashK { sha, r, big_r }
                }
            }
        };
        None
    }

    /// Sign in one go (tests, tools): every slice back to back.
    pub fn sign(&mut self, msg: &[u8]) -> Option<[u8; 64]> {
        if !self.start(msg) {
            return None;
        }
        loop {
            if let Some(s) = self.step() {
                self.phase = Phase::Idle;
                return Some(s);
            }
        }
    }
}
