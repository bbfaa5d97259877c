//! The 190-byte BlockHeader of 07 §3.10, `header_hash` (§2.2) and `seq_sig`.

use crate::consts::*;
use crate::error::Malformed;
use crate::leb::Reader;

/// A 32-byte BLAKE3-256 digest.
pub type Hash = [u8; 32];

/// BlockHeader (07 §3.10; 01 §6.6 field order).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockHeader {
    /// Height.
    pub height: u64,
    /// Epoch.
    pub epoch: u32,
    /// Book.
    pub book: u16,
    /// Previous header's last_step + 1.
    pub first_step: u64,
    /// first_step − 1 for a block with no step.
    pub last_step: u64,
    /// header_hash(height − 1).
    pub prev: Hash,
    /// §6.1.
    pub order_root: Hash,
    /// §6.1.
    pub data_root: Hash,
    /// Sign(seq_key, "vyrn v1 block" ‖ bytes 0..126); zero for a seal block.
    pub seq_sig: [u8; 64],
}

impl BlockHeader {
    /// Serialize to the 190 wire bytes.
    pub fn to_bytes(&self) -> [u8; BLOCK_HEADER_BYTES] {
        let mut b = [0u8; BLOCK_HEADER_BYTES];
        b[0..8].copy_from_slice(&self.height.to_le_bytes());
        b[8..12].copy_from_slice(&self.epoch.to_le_bytes());
        b[12..14].copy_from_slice(&self.book.to_le_bytes());
        b[14..22].copy_from_slice(&self.first_step.to_le_bytes());
        b[22..30].copy_from_slice(&self.last_step.to_le_bytes());
        b[30..62].copy_from_slice(&self.prev);
        b[62..94].copy_from_slice(&self.order_root);
        b[94..126].copy_from_slice(&self.data_root);
        b[126..190].copy_from_slice(&self.seq_sig);
        b
    }

    /// Parse exactly 190 bytes.
    pub fn parse(b: &[u8]) -> Result<Self, Malformed> {
        if b.len() != BLOCK_HEADER_BYTES {
            return Err(Malformed::BadLength);
        }
        let mut r = Reader::new(b);
        Ok(BlockHeader {
            height: r.u64_le()?,
            epoch: r.u32_le()?,
            book: r.u16_le()?,
            first_step: r.u64_le()?,
            last_step: r.u64_le()?,
            prev: r.array()?,
            order_root: r.array()?,
            data_root: r.array()?,
            seq_sig: r.array()?,
        })
    }

    /// The signed prefix, bytes 0..126.
    pub fn signed_bytes(&self) -> [u8; BLOCK_HEADER_SIGNED_BYTES] {
        let full = self.to_bytes();
        let mut b = [0u8; BLOCK_HEADER_SIGNED_BYTES];
        b.copy_from_slice(&full[..BLOCK_HEADER_SIGNED_BYTES]);
        b
    }

    /// The message `seq_sig` signs: "vyrn v1 block" ‖ bytes 0..126 (07 §3.10).
    pub fn sig_message(&self) -> Vec<u8> {
        let mut m = Vec::with_capacity(domain::BLOCK.len() + BLOCK_HEADER_SIGNED_BYTES);
        m.extend_from_slice(domain::BLOCK);
        m.extend_from_slice(&self.signed_bytes());
        m
    }

    /// `header_hash(h)` = BLAKE3("vyrn v1 header" ‖ header_bytes(h)[0..126]) (07 §2.2).
    pub fn header_hash(&self) -> Hash {
        let mut h = blake3::Hasher::new();
        h.update(domain::HEADER);
        h.update(&self.signed_bytes());
        *h.finalize().as_bytes()
    }

    /// Sign with the sequencer key (one-shot; the sliced signer of 07 §6.2 lives in `seq`).
    pub fn sign(&mut self, key: &ed25519_dalek::SigningKey) {
        use ed25519_dalek::Signer;
        self.seq_sig = key.sign(&self.sig_message()).to_bytes();
    }

    /// Verify `seq_sig` under `key` (strict: rejects malleable and small-order signatures).
    pub fn verify(&self, key: &ed25519_dalek::VerifyingKey) -> bool {
        let sig = ed25519_dalek::Signature::from_bytes(&self.seq_sig);
        key.verify_strict(&self.sig_message(), &sig).is_ok()
    }

    /// A seal header carries 64 zero bytes of `seq_sig` (07 §3.10).
    pub fn is_seal(&self) -> bool {
        self.seq_sig == [0u8; 64]
    }
}

/// `order_root(h) = BLAKE3(order_root_A(h) ‖ order_root_B(h))` (07 §6.1).
pub fn order_root(a: &Hash, b: &Hash) -> Hash {
    pair_root(a, b)
}

/// `data_root(h) = BLAKE3(data_root_A(h) ‖ data_root_B(h))` (07 §6.1).
pub fn data_root(a: &Hash, b: &Hash) -> Hash {
    pair_root(a, b)
}

fn pair_root(a: &Hash, b: &Hash) -> Hash {
    let mut h = blake3::Hasher::new();
    h.update(a);
    h.update(b);
    *h.finalize().as_bytes()
}

/// BLAKE3 of nothing: `order_root_B` with one substream (wire-decisions 22).
pub fn empty_root() -> Hash {
    *blake3::hash(&[]).as_bytes()
}

/// `data_root_H(h)`: BLAKE3 over the concatenated 32-byte full hashes, in O-order (07 §6.1).
#[derive(Debug, Clone, Default)]
pub struct DataRootHasher(blake3::Hasher);

impl DataRootHasher {
    /// Append one packet's full hash.
    pub fn push(&mut self, full_hash: &Hash) {
        self.0.update(full_hash);
    }
    /// Finish this block's root and reset for the next block.
    pub fn finish(&mut self) -> Hash {
        let r = *self.0.finalize().as_bytes();
        self.0.reset();
        r
    }
}
