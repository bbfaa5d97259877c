//! The resumable, sliced Ed25519 signer for `seq_sig` (07 §6.2): the order hasher signs each
//! HEADER between its other work, a slice at a time, so a signature never holds its core for
//! long. The output is byte-identical to RFC 8032 (tested against its vectors and
//! ed25519-dalek).
//!
//! A signature is: `r = SHA-512(prefix ‖ M) mod L`, `R = r·B`, `k = SHA-512(R ‖ A ‖ M) mod L`,
//! `S = r + k·a mod L`, `sig = R ‖ S`. Every slice is a few tens of nanoseconds of work
//! (REP_SIGN_SLICE_NS = 50 ns is the budget; `cargo bench -p vyrn-bench --bench seq` measures
//! it):
//! 1. SHA-512, [`ROUNDS_PER_SLICE`] rounds of one compression per slice (hand-written rounds over
//!    FIPS 180-4's constants; `sha2` compresses a whole block per call);
//! 2. `r mod L` in three slices: the digest as four 128-bit chunks, each folded in with one
//!    Montgomery product by `2^(128(k+2)) mod L` (fiat-crypto's scalar field), then the
//!    radix-16 signed digits;
//! 3. `R = r·B`: 64 digits over a table of `j·16^i·B` (j = 1..8, affine Niels form, built once
//!    at key load), each digit in nine slices — a constant-time select over all 8 entries (four
//!    slices of two) with the conditional negation, then the mixed addition's 7 field
//!    multiplications in five slices;
//! 4. `R`'s encoding: the inversion of Z as its addition chain, at most [`FE_OPS_PER_SLICE`]
//!    field squarings or multiplications per slice, then `x` and `y`, then the bytes;
//! 5. `k` like `r`; `S = k·a + r` in one slice (a Montgomery product with `a·2^256 mod L`).
//!
//! Field arithmetic is `fiat-crypto`'s formally verified curve25519 code (ed25519-dalek keeps its
//! own field type private, so its operations cannot be cut between slices). Every step is
//! constant-time in the secret: no branch or index depends on `r`, `a` or the digits.
//! The key is expanded once at load (`seed` → `a`, `prefix`, `A`) and never written.

use fiat_crypto::curve25519_64 as fc;
use fiat_crypto::curve25519_scalar_64 as fcs;
use sha2::Digest;

const BLOCK: usize = 128;
/// The longest message a slice-able signature takes (a HEADER's signing message is 139 bytes).
pub const SIGN_MSG_MAX: usize = 256;
/// SHA-512 rounds per slice.
pub const ROUNDS_PER_SLICE: usize = 8;
/// Field squarings or multiplications per slice of the inversion.
pub const FE_OPS_PER_SLICE: u32 = 2;

const K: [u64; 80] = [
    0x428a2f98d728ae22,
    0x7137449123ef65cd,
    0xb5c0fbcfec4d3b2f,
    0xe9b5dba58189dbbc,
    0x3956c25bf348b538,
    0x59f111f1b605d019,
    0x923f82a4af194f9b,
    0xab1c5ed5da6d8118,
    0xd807aa98a3030242,
    0x12835b0145706fbe,
    0x243185be4ee4b28c,
    0x550c7dc3d5ffb4e2,
    0x72be5d74f27b896f,
    0x80deb1fe3b1696b1,
    0x9bdc06a725c71235,
    0xc19bf174cf692694,
    0xe49b69c19ef14ad2,
    0xefbe4786384f25e3,
    0x0fc19dc68b8cd5b5,
    0x240ca1cc77ac9c65,
    0x2de92c6f592b0275,
    0x4a7484aa6ea6e483,
    0x5cb0a9dcbd41fbd4,
    0x76f988da831153b5,
    0x983e5152ee66dfab,
    0xa831c66d2db43210,
    0xb00327c898fb213f,
    0xbf597fc7beef0ee4,
    0xc6e00bf33da88fc2,
    0xd5a79147930aa725,
    0x06ca6351e003826f,
    0x142929670a0e6e70,
    0x27b70a8546d22ffc,
    0x2e1b21385c26c926,
    0x4d2c6dfc5ac42aed,
    0x53380d139d95b3df,
    0x650a73548baf63de,
    0x766a0abb3c77b2a8,
    0x81c2c92e47edaee6,
    0x92722c851482353b,
    0xa2bfe8a14cf10364,
    0xa81a664bbc423001,
    0xc24b8b70d0f89791,
    0xc76c51a30654be30,
    0xd192e819d6ef5218,
    0xd69906245565a910,
    0xf40e35855771202a,
    0x106aa07032bbd1b8,
    0x19a4c116b8d2d0c8,
    0x1e376c085141ab53,
    0x2748774cdf8eeb99,
    0x34b0bcb5e19b48a8,
    0x391c0cb3c5c95a63,
    0x4ed8aa4ae3418acb,
    0x5b9cca4f7763e373,
    0x682e6ff3d6b2b8a3,
    0x748f82ee5defb2fc,
    0x78a5636f43172f60,
    0x84c87814a1f0ab72,
    0x8cc702081a6439ec,
    0x90befffa23631e28,
    0xa4506cebde82bde9,
    0xbef9a3f7b2c67915,
    0xc67178f2e372532b,
    0xca273eceea26619c,
    0xd186b8c721c0c207,
    0xeada7dd6cde0eb1e,
    0xf57d4f7fee6ed178,
    0x06f067aa72176fba,
    0x0a637dc5a2c898a6,
    0x113f9804bef90dae,
    0x1b710b35131c471b,
    0x28db77f523047d84,
    0x32caab7b40c72493,
    0x3c9ebe0a15c9bebc,
    0x431d67c49c100d4c,
    0x4cc5d4becb3e42b6,
    0x597f299cfc657e2a,
    0x5fcb6fab3ad6faec,
    0x6c44198c4a475817,
];

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

/// A SHA-512 over a message laid out in whole padded blocks, [`ROUNDS_PER_SLICE`] rounds per
/// step (FIPS 180-4 §6.4, with the 16-word rolling message schedule).
#[derive(Clone)]
struct Sha {
    h: [u64; 8],
    v: [u64; 8],
    w: [u64; 16],
    round: usize,
    buf: [u8; SIGN_MSG_MAX + 64 + 2 * BLOCK],
    blocks: usize,
    block: usize,
}

impl Sha {
    fn new(parts: &[&[u8]]) -> Self {
        let mut s = Sha {
            h: H0,
            v: H0,
            w: [0; 16],
            round: 0,
            buf: [0u8; SIGN_MSG_MAX + 64 + 2 * BLOCK],
            blocks: 0,
            block: 0,
        };
        s.load(parts);
        s
    }

    /// Start over on a new message, in place (only the blocks it fills are written).
    fn load(&mut self, parts: &[&[u8]]) {
        let mut n = 0;
        for p in parts {
            self.buf[n..n + p.len()].copy_from_slice(p);
            n += p.len();
        }
        self.pad(n);
    }

    /// The message is `buf[..n]`: pad it and reset the state.
    fn pad(&mut self, n: usize) {
        let bits = (n as u128) * 8;
        let blocks = (n + 1 + 16).div_ceil(BLOCK);
        let end = blocks * BLOCK;
        self.buf[n..end].fill(0);
        self.buf[n] = 0x80;
        self.buf[end - 16..end].copy_from_slice(&bits.to_be_bytes());
        self.h = H0;
        self.round = 0;
        self.blocks = blocks;
        self.block = 0;
    }

    /// [`ROUNDS_PER_SLICE`] rounds; true when the last block is done.
    fn step(&mut self) -> bool {
        if self.round == 0 {
            let b = &self.buf[self.block * BLOCK..(self.block + 1) * BLOCK];
            for (i, w) in self.w.iter_mut().enumerate() {
                let mut x = [0u8; 8];
                x.copy_from_slice(&b[8 * i..8 * i + 8]);
                *w = u64::from_be_bytes(x);
            }
            self.v = self.h;
        }
        let [mut a, mut b, mut c, mut d, mut e, mut f, mut g, mut h] = self.v;
        #[allow(clippy::needless_range_loop)] // t also picks the schedule word
        for t in self.round..self.round + ROUNDS_PER_SLICE {
            let wt = if t < 16 {
                self.w[t]
            } else {
                let w15 = self.w[(t - 15) & 15];
                let w2 = self.w[(t - 2) & 15];
                let s0 = w15.rotate_right(1) ^ w15.rotate_right(8) ^ (w15 >> 7);
                let s1 = w2.rotate_right(19) ^ w2.rotate_right(61) ^ (w2 >> 6);
                let x = self.w[t & 15]
                    .wrapping_add(s0)
                    .wrapping_add(self.w[(t - 7) & 15])
                    .wrapping_add(s1);
                self.w[t & 15] = x;
                x
            };
            let s1 = e.rotate_right(14) ^ e.rotate_right(18) ^ e.rotate_right(41);
            let ch = (e & f) ^ (!e & g);
            let t1 = h
                .wrapping_add(s1)
                .wrapping_add(ch)
                .wrapping_add(K[t])
                .wrapping_add(wt);
            let s0 = a.rotate_right(28) ^ a.rotate_right(34) ^ a.rotate_right(39);
            let maj = (a & b) ^ (a & c) ^ (b & c);
            let t2 = s0.wrapping_add(maj);
            h = g;
            g = f;
            f = e;
            e = d.wrapping_add(t1);
            d = c;
            c = b;
            b = a;
            a = t1.wrapping_add(t2);
        }
        self.v = [a, b, c, d, e, f, g, h];
        self.round += ROUNDS_PER_SLICE;
        if self.round == 80 {
            for (x, y) in self.h.iter_mut().zip(self.v) {
                *x = x.wrapping_add(y);
            }
            self.round = 0;
            self.block += 1;
        }
        self.block == self.blocks
    }

    fn digest(&self) -> [u8; 64] {
        let mut out = [0u8; 64];
        for (i, w) in self.h.iter().enumerate() {
            out[8 * i..8 * i + 8].copy_from_slice(&w.to_be_bytes());
        }
        out
    }
}

// ---------------------------------------------------------------------------------------------
// Field and points (fiat-crypto's field; extended coordinates, a = −1).

type Fe = fc::fiat_25519_tight_field_element;
type Lo = fc::fiat_25519_loose_field_element;

const ZERO: Fe = fc::fiat_25519_tight_field_element([0; 5]);
const ONE: Fe = fc::fiat_25519_tight_field_element([1, 0, 0, 0, 0]);

#[inline(always)]
fn relax(a: &Fe) -> Lo {
    let mut o = fc::fiat_25519_loose_field_element([0; 5]);
    fc::fiat_25519_relax(&mut o, a);
    o
}
#[inline(always)]
fn mul(a: &Fe, b: &Fe) -> Fe {
    let mut o = ZERO;
    fc::fiat_25519_carry_mul(&mut o, &relax(a), &relax(b));
    o
}
#[inline(always)]
fn mul_lo(a: &Lo, b: &Lo) -> Fe {
    let mut o = ZERO;
    fc::fiat_25519_carry_mul(&mut o, a, b);
    o
}
#[inline(always)]
fn sq(a: &Fe) -> Fe {
    let mut o = ZERO;
    fc::fiat_25519_carry_square(&mut o, &relax(a));
    o
}
#[inline(always)]
fn add(a: &Fe, b: &Fe) -> Lo {
    let mut o = fc::fiat_25519_loose_field_element([0; 5]);
    fc::fiat_25519_add(&mut o, a, b);
    o
}
#[inline(always)]
fn sub(a: &Fe, b: &Fe) -> Lo {
    let mut o = fc::fiat_25519_loose_field_element([0; 5]);
    fc::fiat_25519_sub(&mut o, a, b);
    o
}
#[inline(always)]
fn carry(a: &Lo) -> Fe {
    let mut o = ZERO;
    fc::fiat_25519_carry(&mut o, a);
    o
}
fn from_bytes(b: &[u8; 32]) -> Fe {
    let mut o = ZERO;
    fc::fiat_25519_from_bytes(&mut o, b);
    o
}
fn to_bytes(a: &Fe) -> [u8; 32] {
    let mut o = [0u8; 32];
    fc::fiat_25519_to_bytes(&mut o, a);
    o
}

/// 2·d (d = −121665/121666), little-endian.
const D2: [u8; 32] = [
    89, 241, 178, 38, 148, 155, 214, 235, 86, 177, 131, 130, 154, 20, 224, 0, 48, 209, 243, 238,
    242, 128, 142, 25, 231, 252, 223, 86, 220, 217, 6, 36,
];
/// The base point B (RFC 8032 §5.1), x and y, little-endian.
const BX: [u8; 32] = [
    26, 213, 37, 143, 96, 45, 86, 201, 178, 167, 37, 149, 96, 199, 44, 105, 92, 220, 214, 253, 49,
    226, 164, 192, 254, 83, 110, 205, 211, 54, 105, 33,
];
const BY: [u8; 32] = [
    88, 102, 102, 102, 102, 102, 102, 102, 102, 102, 102, 102, 102, 102, 102, 102, 102, 102, 102,
    102, 102, 102, 102, 102, 102, 102, 102, 102, 102, 102, 102, 102,
];

/// A point in extended coordinates (X : Y : Z : T), x = X/Z, y = Y/Z, xy = T/Z.
#[derive(Clone, Copy)]
struct Ext {
    x: Fe,
    y: Fe,
    z: Fe,
    t: Fe,
}

/// An affine point in Niels form: (y + x, y − x, 2d·x·y).
#[derive(Clone, Copy)]
struct Niels {
    ypx: Fe,
    ymx: Fe,
    xy2d: Fe,
}

const IDENTITY: Ext = Ext {
    x: ZERO,
    y: ONE,
    z: ONE,
    t: ZERO,
};
const NIELS_IDENTITY: Niels = Niels {
    ypx: ONE,
    ymx: ONE,
    xy2d: ZERO,
};

/// The mixed addition's state between its slices (add-2008-hwcd-3 with Z2 = 1): A, B, then
/// E, F, G, H.
#[derive(Clone, Copy)]
struct AddTmp {
    a: Fe,
    b: Fe,
    e: Lo,
    f: Lo,
    g: Lo,
    h: Lo,
}

const LO_ZERO: Lo = fc::fiat_25519_loose_field_element([0; 5]);
const ADD_TMP: AddTmp = AddTmp {
    a: ZERO,
    b: ZERO,
    e: LO_ZERO,
    f: LO_ZERO,
    g: LO_ZERO,
    h: LO_ZERO,
};

/// A = (Y1 − X1)·(y2 − x2).
#[inline(always)]
fn add_part1a(p: &Ext, q: &Niels, t: &mut AddTmp) {
    t.a = mul_lo(&sub(&p.y, &p.x), &relax(&q.ymx));
}

/// B = (Y1 + X1)·(y2 + x2).
#[inline(always)]
fn add_part1b(p: &Ext, q: &Niels, t: &mut AddTmp) {
    t.b = mul_lo(&add(&p.y, &p.x), &relax(&q.ypx));
}

/// C = T1·2d·x2·y2, D = 2·Z1; E = B − A, F = D − C, G = D + C, H = B + A.
#[inline(always)]
fn add_part2(p: &Ext, q: &Niels, t: &mut AddTmp) {
    let c = mul(&p.t, &q.xy2d);
    let d = carry(&add(&p.z, &p.z));
    t.e = sub(&t.b, &t.a);
    t.f = sub(&d, &c);
    t.g = add(&d, &c);
    t.h = add(&t.b, &t.a);
}

/// X3 = E·F, Y3 = G·H.
#[inline(always)]
fn add_part3(p: &mut Ext, t: &AddTmp) {
    p.x = mul_lo(&t.e, &t.f);
    p.y = mul_lo(&t.g, &t.h);
}

/// T3 = E·H, Z3 = F·G.
#[inline(always)]
fn add_part4(p: &mut Ext, t: &AddTmp) {
    p.t = mul_lo(&t.e, &t.h);
    p.z = mul_lo(&t.f, &t.g);
}

fn add_niels(p: &Ext, q: &Niels) -> Ext {
    let mut t = ADD_TMP;
    let mut r = *p;
    add_part1a(&r, q, &mut t);
    add_part1b(&r, q, &mut t);
    add_part2(&r, q, &mut t);
    add_part3(&mut r, &t);
    add_part4(&mut r, &t);
    r
}

/// Doubling (dbl-2008-hwcd, a = −1); key load only.
fn double(p: &Ext) -> Ext {
    let a = sq(&p.x);
    let b = sq(&p.y);
    let c = carry(&add(&sq(&p.z), &sq(&p.z)));
    let e = carry(&sub(&carry(&sub(&sq(&carry(&add(&p.x, &p.y))), &a)), &b));
    let g = carry(&sub(&b, &a)); // D + B with D = −A
    let f = carry(&sub(&g, &c));
    let h = carry(&sub(&carry(&sub(&ZERO, &a)), &b)); // D − B
    Ext {
        x: mul(&e, &f),
        y: mul(&g, &h),
        t: mul(&e, &h),
        z: mul(&f, &g),
    }
}

/// z^(p−2) (key load only; the signature runs the same chain in slices).
fn invert(z: &Fe) -> Fe {
    let mut r = [*z, ZERO, ZERO, ZERO];
    for op in INV_CHAIN {
        run_inv_op(&mut r, op, op.n());
    }
    r[1]
}

fn to_niels(p: &Ext) -> Niels {
    let zi = invert(&p.z);
    let x = mul(&p.x, &zi);
    let y = mul(&p.y, &zi);
    Niels {
        ypx: carry(&add(&y, &x)),
        ymx: carry(&sub(&y, &x)),
        xy2d: mul(&mul(&x, &y), &from_bytes(&D2)),
    }
}

/// One step of the inversion chain over registers `r[0..4]` (r[0] = z).
#[derive(Clone, Copy)]
enum InvOp {
    /// r[d] = r[s]^(2^n).
    Sq { d: u8, s: u8, n: u32 },
    /// r[d] = r[a] · r[b].
    Mul { d: u8, a: u8, b: u8 },
}

impl InvOp {
    fn n(&self) -> u32 {
        match self {
            InvOp::Sq { n, .. } => *n,
            InvOp::Mul { .. } => 1,
        }
    }
}

/// z^(p−2) = z^(2^255 − 21) (the ref10 chain). Registers: 0 = z, 1 = t0, 2 = t1, 3 = t2;
/// the result ends in register 1.
const INV_CHAIN: [InvOp; 22] = [
    InvOp::Sq { d: 1, s: 0, n: 1 },   // t0 = z^2
    InvOp::Sq { d: 2, s: 1, n: 2 },   // t1 = z^8
    InvOp::Mul { d: 2, a: 0, b: 2 },  // t1 = z^9
    InvOp::Mul { d: 1, a: 1, b: 2 },  // t0 = z^11
    InvOp::Sq { d: 3, s: 1, n: 1 },   // t2 = z^22
    InvOp::Mul { d: 2, a: 2, b: 3 },  // t1 = z^(2^5 − 1)
    InvOp::Sq { d: 3, s: 2, n: 5 },   // t2 = t1^(2^5)
    InvOp::Mul { d: 2, a: 3, b: 2 },  // t1 = z^(2^10 − 1)
    InvOp::Sq { d: 3, s: 2, n: 10 },  //
    InvOp::Mul { d: 3, a: 3, b: 2 },  // t2 = z^(2^20 − 1)
    InvOp::Sq { d: 0, s: 3, n: 20 },  // (z is no longer needed: r0 = t3)
    InvOp::Mul { d: 3, a: 0, b: 3 },  // t2 = z^(2^40 − 1)
    InvOp::Sq { d: 3, s: 3, n: 10 },  //
    InvOp::Mul { d: 2, a: 3, b: 2 },  // t1 = z^(2^50 − 1)
    InvOp::Sq { d: 3, s: 2, n: 50 },  //
    InvOp::Mul { d: 3, a: 3, b: 2 },  // t2 = z^(2^100 − 1)
    InvOp::Sq { d: 0, s: 3, n: 100 }, //
    InvOp::Mul { d: 3, a: 0, b: 3 },  // t2 = z^(2^200 − 1)
    InvOp::Sq { d: 3, s: 3, n: 50 },  //
    InvOp::Mul { d: 2, a: 3, b: 2 },  // t1 = z^(2^250 − 1)
    InvOp::Sq { d: 2, s: 2, n: 5 },   // t1 = z^(2^255 − 32)
    InvOp::Mul { d: 1, a: 2, b: 1 },  // t0 = z^(2^255 − 21)
];

/// Run `k` units of `op` on the registers, in place.
#[inline(always)]
fn run_inv_op(r: &mut [Fe; 4], op: InvOp, k: u32) {
    match op {
        InvOp::Sq { d, s, .. } => {
            let mut x = r[s as usize];
            for _ in 0..k {
                x = sq(&x);
            }
            r[d as usize] = x;
        }
        InvOp::Mul { d, a, b } => r[d as usize] = mul(&r[a as usize], &r[b as usize]),
    }
}

/// Constant-time: `dst = src` where `c` is 1 (all words, no branch on `c`).
#[inline(always)]
fn cmov(dst: &mut Fe, src: &Fe, c: u64) {
    let m = 0u64.wrapping_sub(c);
    for i in 0..5 {
        dst.0[i] ^= m & (dst.0[i] ^ src.0[i]);
    }
}

/// The radix-16 digits of `b` (0..15), before the carries.
fn nibbles(b: &[u8; 32]) -> [i8; 64] {
    let mut e = [0i8; 64];
    for i in 0..32 {
        e[2 * i] = (b[i] & 15) as i8;
        e[2 * i + 1] = ((b[i] >> 4) & 15) as i8;
    }
    e
}

/// Carries `from..to` (of 0..63) making the digits signed, in [-8, 8): `r < 2^253`, so the top
/// digit stays ≤ 8. Run in three slices.
fn signed_digits(e: &mut [i8; 64], from: usize, to: usize) {
    for i in from..to {
        let carry = (e[i] + 8) >> 4;
        e[i] -= carry << 4;
        e[i + 1] += carry;
    }
}

// ---------------------------------------------------------------------------------------------
// Scalars mod L (fiat-crypto's Montgomery arithmetic; every input < L).

type Sc = fcs::fiat_25519_scalar_montgomery_domain_field_element;

/// 2^384, 2^512, 2^640 mod L: a Montgomery product with 2^(128(k+2)) mod L multiplies a
/// normal-form value by 2^(128k).
const M: [[u64; 4]; 3] = [
    [
        0x39822129a02a6271,
        0xb64a7f435e4fdd95,
        0x7ed9ce5a30a2c131,
        0x02106215d086329a,
    ],
    [
        0xa40611e3449c0f01,
        0xd00e1ba768859347,
        0xceec73d217f5be65,
        0x0399411b7c309a3d,
    ],
    [
        0xe372e8efd301e8d4,
        0xad24db5f36cabecd,
        0xf2ee573e5a6e5f71,
        0x0b5c63aa97a331b4,
    ],
];

#[inline(always)]
fn mont(a: &[u64; 4], b: &[u64; 4]) -> [u64; 4] {
    let mut o = fcs::fiat_25519_scalar_montgomery_domain_field_element([0; 4]);
    fcs::fiat_25519_scalar_mul(
        &mut o,
        &fcs::fiat_25519_scalar_montgomery_domain_field_element(*a),
        &fcs::fiat_25519_scalar_montgomery_domain_field_element(*b),
    );
    o.0
}

#[inline(always)]
fn sc_add(a: &[u64; 4], b: &[u64; 4]) -> [u64; 4] {
    let mut o: Sc = fcs::fiat_25519_scalar_montgomery_domain_field_element([0; 4]);
    fcs::fiat_25519_scalar_add(
        &mut o,
        &fcs::fiat_25519_scalar_montgomery_domain_field_element(*a),
        &fcs::fiat_25519_scalar_montgomery_domain_field_element(*b),
    );
    o.0
}

/// 128-bit chunk `k` of a 64-byte little-endian number, as a 4-limb value (< 2^128 < L).
fn chunk(h: &[u8; 64], k: usize) -> [u64; 4] {
    let mut lo = [0u8; 8];
    let mut hi = [0u8; 8];
    lo.copy_from_slice(&h[16 * k..16 * k + 8]);
    hi.copy_from_slice(&h[16 * k + 8..16 * k + 16]);
    [u64::from_le_bytes(lo), u64::from_le_bytes(hi), 0, 0]
}

/// One slice (`k` = 1, 2, 3) of `x mod L` = c0 + c1·2^128 + c2·2^256 + c3·2^384.
fn reduce_step(h: &[u8; 64], acc: &[u64; 4], k: usize) -> [u64; 4] {
    let base = if k == 1 { chunk(h, 0) } else { *acc };
    sc_add(&base, &mont(&chunk(h, k), &M[k - 1]))
}

fn sc_bytes(a: &[u64; 4]) -> [u8; 32] {
    let mut o = [0u8; 32];
    fcs::fiat_25519_scalar_to_bytes(&mut o, a);
    o
}

// ---------------------------------------------------------------------------------------------
// The signer.

/// Where a signature is; the working state lives in the signer itself, so a slice mutates it
/// in place and never moves it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Phase {
    Idle,
    LoadR,
    LoadK,
    HashR,
    DigestR,
    /// `r mod L`, slice 1..=3.
    ReduceR(u8),
    /// `r`'s bytes.
    RBytes,
    /// The radix-16 signed digits of `r`, slice 0..=2.
    Digits(u8),
    /// Digit `i`, parts 0–3 (select) and 4–8 (the addition).
    MulR {
        i: u8,
        part: u8,
    },
    /// The inversion of Z: chain op `op`, units of it done.
    Invert {
        op: u8,
        done: u32,
    },
    Encode,
    EncodeBytes,
    /// R into the k hash's message.
    StartK,
    HashK,
    DigestK,
    /// `k mod L`, slice 1..=3.
    ReduceK(u8),
    Sign,
    SignBytes,
    Done,
}

/// The sliced signer.
pub struct SlicedSigner {
    /// `a·2^256 mod L` (Montgomery form of the secret scalar).
    a_mont: [u64; 4],
    prefix: [u8; 32],
    public: [u8; 32],
    table: Vec<[Niels; 8]>,
    msg: [u8; SIGN_MSG_MAX],
    len: usize,
    phase: Phase,
    slices: u64,
    // Working state of the signature in progress.
    sha: Sha,
    sha_k: Sha,
    h: [u8; 64],
    r: [u64; 4],
    k: [u64; 4],
    digits: [i8; 64],
    acc: Ext,
    sel: Niels,
    tmp: AddTmp,
    reg: [Fe; 4],
    big_r: [u8; 32],
    sig: [u8; 64],
}

impl std::fmt::Debug for SlicedSigner {
    // The key is secret: never printed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlicedSigner")
            .field("public", &self.public)
            .finish_non_exhaustive()
    }
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
        let a = curve25519_dalek::scalar::Scalar::from_bytes_mod_order(a_bytes);
        let mut a_limbs = [0u64; 4];
        fcs::fiat_25519_scalar_from_bytes(&mut a_limbs, &a.to_bytes());
        let mut prefix = [0u8; 32];
        prefix.copy_from_slice(&h[32..]);
        let public = curve25519_dalek::EdwardsPoint::mul_base_clamped(a_bytes)
            .compress()
            .to_bytes();
        // j·16^i·B, j = 1..8, i = 0..63, affine Niels.
        let (bx, by) = (from_bytes(&BX), from_bytes(&BY));
        let mut base = Ext {
            x: bx,
            y: by,
            z: ONE,
            t: mul(&bx, &by),
        };
        let mut table = Vec::with_capacity(64);
        for _ in 0..64 {
            let n = to_niels(&base);
            let mut row = [n; 8];
            let mut p = base;
            for slot in row.iter_mut().skip(1) {
                p = add_niels(&p, &n);
                *slot = to_niels(&p);
            }
            table.push(row);
            for _ in 0..4 {
                base = double(&base);
            }
        }
        SlicedSigner {
            // a·R = Montgomery product of a and R^2 = 2^512 mod L.
            a_mont: mont(&a_limbs, &M[1]),
            prefix,
            public,
            table,
            msg: [0; SIGN_MSG_MAX],
            len: 0,
            phase: Phase::Idle,
            slices: 0,
            sha: Sha::new(&[]),
            sha_k: Sha::new(&[]),
            h: [0; 64],
            r: [0; 4],
            k: [0; 4],
            digits: [0; 64],
            acc: IDENTITY,
            sel: NIELS_IDENTITY,
            tmp: ADD_TMP,
            reg: [ZERO; 4],
            big_r: [0; 32],
            sig: [0; 64],
        }
    }

    /// The public key `A`.
    pub fn public(&self) -> [u8; 32] {
        self.public
    }

    /// Whether a signature is in progress.
    pub fn busy(&self) -> bool {
        !matches!(self.phase, Phase::Idle | Phase::Done)
    }

    /// Start signing `msg` (≤ SIGN_MSG_MAX bytes). Refused while busy.
    pub fn start(&mut self, msg: &[u8]) -> bool {
        if self.busy() || msg.len() > SIGN_MSG_MAX {
            return false;
        }
        self.msg[..msg.len()].copy_from_slice(msg);
        self.len = msg.len();
        self.phase = Phase::LoadR;
        true
    }

    /// Forget a finished signature (the signer is idle again).
    pub fn reset(&mut self) {
        if self.phase == Phase::Done {
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
        self.phase = match self.phase {
            Phase::Idle => Phase::Idle,
            Phase::Done => return Some(self.sig),
            // prefix ‖ M for the r hash; then A ‖ M (R comes later) for the k hash.
            Phase::LoadR => {
                self.sha.load(&[&self.prefix, &self.msg[..self.len]]);
                Phase::LoadK
            }
            Phase::LoadK => {
                let len = self.len;
                self.sha_k.buf[32..64].copy_from_slice(&self.public);
                self.sha_k.buf[64..64 + len].copy_from_slice(&self.msg[..len]);
                self.sha_k.pad(64 + len);
                Phase::HashR
            }
            Phase::HashR => {
                if self.sha.step() {
                    Phase::DigestR
                } else {
                    Phase::HashR
                }
            }
            Phase::DigestR => {
                self.h = self.sha.digest();
                Phase::ReduceR(1)
            }
            Phase::ReduceR(k) => {
                self.r = reduce_step(&self.h, &self.r, k as usize);
                if k < 3 {
                    Phase::ReduceR(k + 1)
                } else {
                    Phase::RBytes
                }
            }
            Phase::RBytes => {
                self.big_r = sc_bytes(&self.r);
                Phase::Digits(0)
            }
            Phase::Digits(0) => {
                self.digits = nibbles(&self.big_r);
                signed_digits(&mut self.digits, 0, 21);
                Phase::Digits(1)
            }
            Phase::Digits(1) => {
                signed_digits(&mut self.digits, 21, 42);
                Phase::Digits(2)
            }
            Phase::Digits(_) => {
                signed_digits(&mut self.digits, 42, 63);
                self.acc = IDENTITY;
                Phase::MulR { i: 0, part: 0 }
            }
            Phase::MulR { i, part } => {
                match part {
                    // Constant-time select of |d|·16^i·B over all 8 entries (four slices of
                    // two), then −P if d < 0.
                    0..=3 => {
                        let d = self.digits[i as usize];
                        let m = d.unsigned_abs() as u64;
                        let sel = &mut self.sel;
                        if part == 0 {
                            *sel = NIELS_IDENTITY;
                        }
                        let from = 2 * part as usize;
                        for (j, p) in self.table[i as usize][from..from + 2].iter().enumerate() {
                            let eq = (((from + j) as u64 + 1) ^ m).wrapping_sub(1) >> 63;
                            cmov(&mut sel.ypx, &p.ypx, eq);
                            cmov(&mut sel.ymx, &p.ymx, eq);
                            cmov(&mut sel.xy2d, &p.xy2d, eq);
                        }
                        if part == 3 {
                            let neg = ((d as u8) >> 7) as u64;
                            let (ypx, ymx) = (sel.ypx, sel.ymx);
                            cmov(&mut sel.ypx, &ymx, neg);
                            cmov(&mut sel.ymx, &ypx, neg);
                            let negd = carry(&sub(&ZERO, &sel.xy2d));
                            cmov(&mut sel.xy2d, &negd, neg);
                        }
                    }
                    4 => add_part1a(&self.acc, &self.sel, &mut self.tmp),
                    5 => add_part1b(&self.acc, &self.sel, &mut self.tmp),
                    6 => add_part2(&self.acc, &self.sel, &mut self.tmp),
                    7 => add_part3(&mut self.acc, &self.tmp),
                    _ => add_part4(&mut self.acc, &self.tmp),
                }
                if part < 8 {
                    Phase::MulR { i, part: part + 1 }
                } else if i == 63 {
                    self.reg = [self.acc.z, ZERO, ZERO, ZERO];
                    Phase::Invert { op: 0, done: 0 }
                } else {
                    Phase::MulR { i: i + 1, part: 0 }
                }
            }
            Phase::Invert { mut op, mut done } => {
                // At most FE_OPS_PER_SLICE squarings or multiplications.
                let mut budget = FE_OPS_PER_SLICE;
                while budget > 0 && (op as usize) < INV_CHAIN.len() {
                    let o = INV_CHAIN[op as usize];
                    let k = (o.n() - done).min(budget);
                    // An Sq op continues in place once started (its source is its destination).
                    let o = match (o, done) {
                        (InvOp::Sq { d, n, .. }, x) if x > 0 => InvOp::Sq { d, s: d, n },
                        _ => o,
                    };
                    run_inv_op(&mut self.reg, o, k);
                    done += k;
                    budget -= k;
                    if done == INV_CHAIN[op as usize].n() {
                        op += 1;
                        done = 0;
                    }
                }
                if op as usize == INV_CHAIN.len() {
                    Phase::Encode
                } else {
                    Phase::Invert { op, done }
                }
            }
            Phase::Encode => {
                // x and y (kept in acc.x, acc.y).
                let zi = self.reg[1];
                self.acc.x = mul(&self.acc.x, &zi);
                self.acc.y = mul(&self.acc.y, &zi);
                Phase::EncodeBytes
            }
            Phase::EncodeBytes => {
                self.big_r = to_bytes(&self.acc.y);
                self.big_r[31] |= (to_bytes(&self.acc.x)[0] & 1) << 7;
                Phase::StartK
            }
            // The k hash's message R ‖ A ‖ M: A ‖ M was laid out while M was hot (LoadK).
            Phase::StartK => {
                self.sha_k.buf[..32].copy_from_slice(&self.big_r);
                Phase::HashK
            }
            Phase::HashK => {
                if self.sha_k.step() {
                    Phase::DigestK
                } else {
                    Phase::HashK
                }
            }
            Phase::DigestK => {
                self.h = self.sha_k.digest();
                Phase::ReduceK(1)
            }
            Phase::ReduceK(k) => {
                self.k = reduce_step(&self.h, &self.k, k as usize);
                if k < 3 {
                    Phase::ReduceK(k + 1)
                } else {
                    Phase::Sign
                }
            }
            Phase::Sign => {
                // S = k·a + r mod L: mont(k, a·R) = k·a.
                self.k = sc_add(&mont(&self.k, &self.a_mont), &self.r);
                Phase::SignBytes
            }
            Phase::SignBytes => {
                self.sig[..32].copy_from_slice(&self.big_r);
                self.sig[32..].copy_from_slice(&sc_bytes(&self.k));
                self.phase = Phase::Done;
                return Some(self.sig);
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
