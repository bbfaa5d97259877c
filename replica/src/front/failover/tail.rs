//! The ORDER section bytes of the newest blocks, per substream (07 §9.4): the seal's
//! `order_root` covers each substream's bytes after `BlockMark(H*)` through `F*`, and when the
//! box died after closing a block whose header never came, that span crosses BlockMarks — the
//! decoder's per-block roots cannot be joined into it (BLAKE3 of a concatenation is not a
//! function of the parts' digests), so the bytes are kept.
//!
//! Kept: the newest [`TAIL_BLOCKS`] heights per substream, as many as the decoder keeps marks
//! for and a seal's range may span (REP_MAX_SEAL_RANGE). A header normally follows its mark by
//! one signature (tens of µs), so the unsigned tail is one or two blocks; a box whose signer
//! fell behind (at start, under load) leaves more — the takeover campaign met 18. A seal whose
//! `H*` is older than what is kept is refused here (`None`), like one this replica lacks frames
//! for. Each block's buffer is reused once it ages out: no allocation per block once warm.

use std::collections::VecDeque;

use vyrn_wire::header::Hash;

/// Heights kept per substream.
pub const TAIL_BLOCKS: usize = vyrn_wire::consts::REP_MAX_SEAL_RANGE as usize;

/// The newest blocks' ORDER section bytes, per substream.
#[derive(Debug, Clone, Default)]
pub struct TailBytes {
    subs: [Sub; 2],
}

#[derive(Debug, Clone, Default)]
struct Sub {
    /// `(height, bytes)`, oldest first, heights consecutive.
    blocks: VecDeque<(u64, Vec<u8>)>,
    /// The lowest height whose bytes were not dropped (the first height seen, then the
    /// oldest kept once one aged out).
    from: Option<u64>,
    spare: Vec<Vec<u8>>,
}

impl TailBytes {
    /// ORDER section bytes of block `height` on `stream` (the decoder's `order_bytes`, in
    /// order: a block's pieces, then the next block's).
    pub fn push(&mut self, stream: u8, height: u64, bytes: &[u8]) {
        let s = &mut self.subs[stream as usize & 1];
        s.from.get_or_insert(height);
        if s.blocks.back().is_none_or(|b| b.0 < height) {
            // Heights the decoder passed with no bytes (none: every block has its mark) still
            // get an entry, so the kept heights stay consecutive.
            let next = s.blocks.back().map_or(height, |b| b.0 + 1);
            for h in next..=height {
                if s.blocks.len() == TAIL_BLOCKS {
                    if let Some((_, mut old)) = s.blocks.pop_front() {
                        old.clear();
                        s.spare.push(old);
                    }
                    s.from = s.blocks.front().map(|b| b.0);
                }
                let buf = s.spare.pop().unwrap_or_default();
                s.blocks.push_back((h, buf));
            }
        }
        if let Some(b) = s.blocks.iter_mut().rev().find(|b| b.0 == height) {
            b.1.extend_from_slice(bytes);
        }
    }

    /// BLAKE3 over `stream`'s bytes after `BlockMark(h_star)` through everything pushed (07
    /// §9.4); `None` when some of them are no longer kept.
    pub fn root_since(&self, stream: u8, h_star: u64) -> Option<Hash> {
        let s = &self.subs[stream as usize & 1];
        if s.from.is_some_and(|f| f > h_star + 1) {
            return None;
        }
        let mut h = blake3::Hasher::new();
        for (_, b) in s.blocks.iter().filter(|b| b.0 > h_star) {
            h.update(b);
        }
        Some(*h.finalize().as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b3(parts: &[&[u8]]) -> Hash {
        let mut h = blake3::Hasher::new();
        for p in parts {
            h.update(p);
        }
        *h.finalize().as_bytes()
    }

    #[test]
    fn the_root_since_a_mark_spans_the_blocks_after_it() {
        let mut t = TailBytes::default();
        t.push(0, 1, b"aa");
        t.push(0, 1, b"bb");
        t.push(0, 2, b"cc");
        t.push(0, 3, b"dd");
        t.push(1, 1, b"xx");
        assert_eq!(t.root_since(0, 0), Some(b3(&[b"aabbccdd"])));
        assert_eq!(t.root_since(0, 1), Some(b3(&[b"ccdd"])));
        assert_eq!(t.root_since(0, 3), Some(b3(&[])));
        assert_eq!(t.root_since(1, 1), Some(b3(&[])));
        assert_eq!(t.root_since(1, 0), Some(b3(&[b"xx"])));
    }

    #[test]
    fn heights_older_than_what_is_kept_give_no_root() {
        let mut t = TailBytes::default();
        for h in 1..=(TAIL_BLOCKS as u64 + 4) {
            t.push(0, h, &[h as u8]);
        }
        let oldest = 5;
        assert_eq!(t.root_since(0, oldest - 2), None);
        let want: Vec<u8> = (oldest..=TAIL_BLOCKS as u64 + 4).map(|h| h as u8).collect();
        assert_eq!(t.root_since(0, oldest - 1), Some(b3(&[&want])));
    }
}
