//! `VoterDouble`: a **test double** for a voting replica, until replicas and consensus exist
//!. It decodes every frame with `wire`'s replica decoder, checks each HEADER's
//! `order_root` against the block it decoded and its `seq_sig` against the sequencer's key,
//! acknowledges the contiguous `frame_seq` per substream (RepAck, 07 §4.8) and votes to finalize
//! every header that checks (a stand-in for Simplex); it reports the holes it sees so its
//! driver can NACK them. It is not a replica: no data join, no `data_root`, no replay, no
//! consensus.

use std::collections::{BTreeMap, HashMap};
use vyrn_wire::decoder::{BlockRoots, DecState, Pos, Sink};
use vyrn_wire::frame::FrameHeader;
use vyrn_wire::header::BlockHeader;
use vyrn_wire::layout::Layout;
use vyrn_wire::msg::consensus::{ProposalKind, RepProposal};

#[derive(Debug, Default)]
struct Seen {
    roots: HashMap<u64, [u8; 32]>,
    /// Headers decoded before their block was complete (one substream behind a hole).
    early: HashMap<u64, BlockHeader>,
    votes: Vec<u64>,
    /// header_hash of every checked header, by height (for finalize signatures).
    hashes: HashMap<u64, [u8; 32]>,
    ok: u64,
    bad: u64,
    key: Option<ed25519_dalek::VerifyingKey>,
}

impl Seen {
    fn judge(&mut self, h: &BlockHeader, root: [u8; 32]) {
        if root == h.order_root && self.key.is_some_and(|k| h.verify(&k)) {
            self.ok += 1;
            self.votes.push(h.height);
            self.hashes.insert(h.height, h.header_hash());
        } else {
            self.bad += 1;
        }
    }
}

impl Sink for Seen {
    fn block(&mut self, b: &BlockRoots) {
        match self.early.remove(&b.height) {
            Some(h) => self.judge(&h, b.order_root),
            None => {
                self.roots.insert(b.height, b.order_root);
            }
        }
    }
    fn header(&mut self, _: Pos, h: &BlockHeader) {
        match self.roots.remove(&h.height) {
            Some(root) => self.judge(h, root),
            None => {
                self.early.insert(h.height, *h);
            }
        }
    }
}

/// A voting replica's stand-in (test double).
#[derive(Debug)]
pub struct VoterDouble {
    dec: DecState,
    seen: Seen,
    contiguous: [u64; 2],
    /// Frames past a hole, held until it is repaired (07 §4.9), per substream.
    held: [BTreeMap<u64, Vec<u8>>; 2],
    dups: u64,
    errors: u64,
    /// While false the double decodes but neither acks nor votes (fault injection).
    pub acking: bool,
    /// While false the double acks but does not vote (fault injection: finality stalls).
    pub voting: bool,
}

impl VoterDouble {
    /// A double for `layout`, trusting `seq_key`.
    pub fn new(layout: Layout, seq_key: ed25519_dalek::VerifyingKey) -> Self {
        VoterDouble {
            dec: DecState::new(layout).expect("valid layout"),
            seen: Seen {
                key: Some(seq_key),
                ..Seen::default()
            },
            contiguous: [0; 2],
            held: Default::default(),
            dups: 0,
            errors: 0,
            acking: true,
            voting: true,
        }
    }

    /// One frame from either path, in any order: the other path's copy and retransmissions
    /// are dropped by `frame_seq`; frames past a hole wait for it (07 §4.9), then go to the
    /// decoder in `frame_seq` order.
    pub fn on_frame(&mut self, bytes: &[u8], now: u64) {
        let Ok((h, _)) = FrameHeader::parse(bytes) else {
            self.errors += 1;
            return;
        };
        let s = (h.stream as usize).min(1);
        if h.frame_seq <= self.contiguous[s] || self.held[s].contains_key(&h.frame_seq) {
            self.dups += 1;
            return;
        }
        self.held[s].insert(h.frame_seq, bytes.to_vec());
        while let Some(f) = self.held[s].remove(&(self.contiguous[s] + 1)) {
            self.contiguous[s] += 1;
            if self.dec.on_frame(&f, now, &mut self.seen).is_err() {
                self.errors += 1;
            }
        }
    }

    /// Holes to NACK: `(stream, from, to)` before the first held frame of each substream.
    pub fn holes(&self) -> Vec<(u8, u64, u64)> {
        (0..2)
            .filter_map(|s| {
                let (&first, _) = self.held[s].iter().next()?;
                Some((s as u8, self.contiguous[s] + 1, first - 1))
            })
            .collect()
    }

    /// Contiguous frame_seq per substream.
    pub fn contiguous(&self) -> [u64; 2] {
        self.contiguous
    }

    /// Copies dropped as duplicates (the other path, retransmissions).
    pub fn dups(&self) -> u64 {
        self.dups
    }

    /// Its RepAck now, if acking: contiguous frame_seq per substream.
    pub fn ack(&self) -> Option<[u64; 2]> {
        self.acking.then_some(self.contiguous)
    }

    /// Finalize votes since the last call, if voting.
    pub fn take_votes(&mut self) -> Vec<u64> {
        if self.voting && self.acking {
            std::mem::take(&mut self.seen.votes)
        } else {
            Vec::new()
        }
    }

    /// The finalize proposal of one checked height (a stand-in for Simplex's: one height per
    /// proposal), if that header checked.
    pub fn proposal(&self, epoch: u32, height: u64) -> Option<RepProposal> {
        let last_hash = *self.seen.hashes.get(&height)?;
        Some(RepProposal {
            kind: ProposalKind::Headers,
            epoch,
            first_height: height,
            last_height: height,
            last_hash,
            excl_root: [0; 32],
        })
    }

    /// Forget the header hashes of heights ≤ `h` (finalized).
    pub fn forget(&mut self, h: u64) {
        self.seen.hashes.retain(|&k, _| k > h);
    }

    /// The decoder's counters (frames, records, steps, blocks, hashes, errors).
    pub fn decoder_counters(&self) -> vyrn_wire::decoder::DecCounters {
        self.dec.counters()
    }

    /// Headers that checked (order_root and seq_sig), voted or waiting to be.
    pub fn headers_ok(&self) -> u64 {
        self.seen.ok
    }

    /// Decoder errors and headers that did not check.
    pub fn faults(&self) -> (u64, u64) {
        (self.errors, self.seen.bad)
    }
}
