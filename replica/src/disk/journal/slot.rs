//! The slot head: one 4 KiB page the journal writes in front of every `REP_BlockRecord` in a
//! segment file (this project's framing; 07 §8.2 fixes the record, not the file).
//!
//! `REP_BlockRecord` carries no checksum over its sections (its reserved bytes must be zero)
//! and its `order_root`/`data_root` cannot be recomputed from the record alone, so a flipped
//! byte in the order or data bytes would still parse. The slot head carries the record's
//! length and a BLAKE3 of its bytes, and a hash of itself, so recovery can tell a torn or
//! corrupt record from a good one, and skip a bad record without trusting its own length
//! fields.
//!
//! ```text
//! off size field
//!   0    8 magic "VYRNSLT1"
//!   8    1 state: 1 live, 2 evicted (tombstone written by the retention ring)
//!   9    7 reserved 0
//!  16    8 height u64 LE
//!  24    8 rec_len u64 LE (the padded record's length, a non-zero multiple of 4096)
//!  32   32 rec_hash = BLAKE3("vyrn v1 journal record" ‖ record bytes)
//!  64   32 head_hash = BLAKE3("vyrn v1 journal slot" ‖ bytes 0..64)
//!  96 4000 zero
//! 4096    … the record (rec_len bytes)
//! ```

use super::backend::PAGE;

/// Slot head magic.
pub const SLOT_MAGIC: [u8; 8] = *b"VYRNSLT1";
/// Bytes of the slot head (one page).
pub const SLOT_HEAD_BYTES: usize = PAGE;
const USED: usize = 96;

/// Whether a slot still holds its block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotState {
    /// The block is in the journal.
    Live = 1,
    /// The retention ring deleted the block (07 §8.3); recovery skips it.
    Evicted = 2,
}

/// A decoded slot head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotHead {
    /// Live or evicted.
    pub state: SlotState,
    /// The block's height.
    pub height: u64,
    /// The padded record length that follows the head.
    pub rec_len: u64,
    /// BLAKE3 of the record bytes (domain-separated).
    pub rec_hash: [u8; 32],
}

/// Why a page is not a slot head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotError {
    /// Shorter than a page.
    Short,
    /// Wrong magic (garbage, or a zeroed page).
    Magic,
    /// `head_hash` does not match (torn or corrupt head).
    Hash,
    /// Hash matches but a field is impossible (unknown state, reserved bytes, bad length).
    Field,
}

/// The record hash stored in a slot head and the journal's index.
pub fn record_hash(rec: &[u8]) -> [u8; 32] {
    let mut h = blake3::Hasher::new();
    h.update(b"vyrn v1 journal record");
    h.update(rec);
    *h.finalize().as_bytes()
}

fn head_hash(b: &[u8]) -> [u8; 32] {
    let mut h = blake3::Hasher::new();
    h.update(b"vyrn v1 journal slot");
    h.update(b);
    *h.finalize().as_bytes()
}

impl SlotHead {
    /// Write the head into the first page of `page` (which the caller zeroed).
    pub fn write_to(&self, page: &mut [u8]) {
        let b = &mut page[..USED];
        b[0..8].copy_from_slice(&SLOT_MAGIC);
        b[8] = self.state as u8;
        b[9..16].fill(0);
        b[16..24].copy_from_slice(&self.height.to_le_bytes());
        b[24..32].copy_from_slice(&self.rec_len.to_le_bytes());
        b[32..64].copy_from_slice(&self.rec_hash);
        let hh = head_hash(&b[..64]);
        b[64..96].copy_from_slice(&hh);
    }

    /// Decode and check a page.
    pub fn read(page: &[u8]) -> Result<SlotHead, SlotError> {
        let Some(p) = page.get(..SLOT_HEAD_BYTES) else {
            return Err(SlotError::Short);
        };
        if p[0..8] != SLOT_MAGIC {
            return Err(SlotError::Magic);
        }
        if head_hash(&p[..64])[..] != p[64..96] {
            return Err(SlotError::Hash);
        }
        let state = match p[8] {
            1 => SlotState::Live,
            2 => SlotState::Evicted,
            _ => return Err(SlotError::Field),
        };
        if p[9..16].iter().any(|&x| x != 0) || p[USED..].iter().any(|&x| x != 0) {
            return Err(SlotError::Field);
        }
        let mut u = [0u8; 8];
        u.copy_from_slice(&p[16..24]);
        let height = u64::from_le_bytes(u);
        u.copy_from_slice(&p[24..32]);
        let rec_len = u64::from_le_bytes(u);
        if rec_len == 0 || rec_len % PAGE as u64 != 0 {
            return Err(SlotError::Field);
        }
        let mut rec_hash = [0u8; 32];
        rec_hash.copy_from_slice(&p[32..64]);
        Ok(SlotHead {
            state,
            height,
            rec_len,
            rec_hash,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_round_trip_and_every_flipped_byte_refused() {
        let h = SlotHead {
            state: SlotState::Live,
            height: 77,
            rec_len: 8192,
            rec_hash: record_hash(b"x"),
        };
        let mut p = vec![0u8; PAGE];
        h.write_to(&mut p);
        assert_eq!(SlotHead::read(&p), Ok(h));
        for i in 0..USED {
            let mut q = p.clone();
            q[i] ^= 0x10;
            assert!(SlotHead::read(&q).is_err(), "byte {i}");
        }
        let mut q = p.clone();
        q[PAGE - 1] = 1;
        assert_eq!(SlotHead::read(&q), Err(SlotError::Field));
        assert_eq!(SlotHead::read(&p[..PAGE - 1]), Err(SlotError::Short));
        assert_eq!(SlotHead::read(&[0u8; PAGE]), Err(SlotError::Magic));
    }
}
