//! `VoterDouble`: a **test double** for a voting replica, until replicas and consensus exist
//! (issue 4 item 7). It decodes every frame with `wire`'s replica decoder, checks each HEADER's
//! `order_root` against the block it decoded and its `seq_sig` against the sequencer's key,
//! acknowledges the contiguous `frame_seq` per substream (RepAck, 07 §4.8) and votes to finalize
//! every header that checks (a stand-in for Simplex). It is not a replica: no NACK, no data
//! join, no `data_root`, no replay, no consensus.

use std::collections::HashMap;
use vyrn_wire::decoder::{BlockRoots, DecState, Pos, Sink};
use vyrn_wire::frame::FrameHeader;
use vyrn_wire::header::BlockHeader;
use vyrn_wire::layout::Layout;

#[derive(Debug, Default)]
struct Seen {
    roots: HashMap<u64, [u8; 32]>,
    votes: Vec<u64>,
    bad: u64,
    key: Option<ed25519_dalek::VerifyingKey>,
}

impl Sink for Seen {
    fn block(&mut self, b: &BlockRoots) {
        self.roots.insert(b.height, b.order_root);
    }
    fn header(&mut self, _: Pos, h: &BlockHeader) {
        let ok = self.roots.remove(&h.height) == Some(h.order_root)
            && self.key.is_some_and(|k| h.verify(&k));
        if ok {
            self.votes.push(h.height);
        } else {
            self.bad += 1;
        }
    }
}

/// A voting replica's stand-in (test double).
#[derive(Debug)]
pub struct VoterDouble {
    dec: DecState,
    seen: Seen,
    contiguous: [u64; 2],
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
            errors: 0,
            acking: true,
            voting: true,
        }
    }

    /// One frame, in `frame_seq` order per substream.
    pub fn on_frame(&mut self, bytes: &[u8], now: u64) {
        if let Ok((h, _)) = FrameHeader::parse(bytes) {
            let s = (h.stream as usize).min(1);
            if h.frame_seq == self.contiguous[s] + 1 {
                self.contiguous[s] = h.frame_seq;
            }
        }
        if self.dec.on_frame(bytes, now, &mut self.seen).is_err() {
            self.errors += 1;
        }
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

    /// Decoder errors and headers that did not check.
    pub fn faults(&self) -> (u64, u64) {
        (self.errors, self.seen.bad)
    }
}
