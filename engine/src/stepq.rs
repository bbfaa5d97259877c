//! The replay engine's queue of decoded steps waiting for their cut (07 §7.1 dependency 2).
//!
//! Written here rather than a `VecDeque<LoggedStep>`: that queue held two heap buffers per step
//! (cut and payload), taken from a spare pool, moved in and out of the queue and back to the
//! pool — ~9 % of a replay tile at the peak mix (`--bench replica`, 2026-12-04). Here the slots
//! stay put and keep their buffers: the cuts are one flat array (`stride` words a slot, the
//! layout's lane count), each slot's payload buffer is reused in place, and a push copies only
//! the step's own bytes. No allocation once warm (the queue doubles when full, rarely).

use crate::bbo::StepIn;
use vyrn_wire::records::StepKind;

/// A queued step's fixed fields.
#[derive(Debug, Clone, Copy)]
struct Meta {
    step: u64,
    kind: StepKind,
    src_lane: u8,
    src_lane_seq: u64,
    /// Words of the cut (≤ the queue's stride).
    nc: usize,
}

const EMPTY: Meta = Meta {
    step: 0,
    kind: StepKind::Cross,
    src_lane: 0,
    src_lane_seq: 0,
    nc: 0,
};

/// A FIFO of steps, oldest first; see the module docs.
#[derive(Debug)]
pub struct StepQueue {
    meta: Vec<Meta>,
    /// Slot `i`'s cut is `cuts[i * stride..][..meta[i].nc]`.
    cuts: Vec<u64>,
    payloads: Vec<Vec<u8>>,
    stride: usize,
    head: usize,
    len: usize,
}

impl StepQueue {
    /// An empty queue for cuts of `stride` words (a longer cut re-lays the queue once).
    pub fn new(stride: usize) -> Self {
        StepQueue {
            meta: Vec::new(),
            cuts: Vec::new(),
            payloads: Vec::new(),
            stride: stride.max(1),
            head: 0,
            len: 0,
        }
    }

    /// Steps queued.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Nothing queued.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn slot(&self, i: usize) -> usize {
        // The capacity is a power of two.
        (self.head + i) & (self.meta.len() - 1)
    }

    /// The `i`-th oldest step.
    pub fn get(&self, i: usize) -> Option<StepIn<'_>> {
        if i >= self.len {
            return None;
        }
        let at = self.slot(i);
        let m = &self.meta[at];
        Some(StepIn {
            step: m.step,
            kind: m.kind,
            src_lane: m.src_lane,
            src_lane_seq: m.src_lane_seq,
            cut: &self.cuts[at * self.stride..][..m.nc],
            payload: &self.payloads[at],
        })
    }

    /// The oldest step.
    pub fn front(&self) -> Option<StepIn<'_>> {
        self.get(0)
    }

    /// Drop the oldest step (its slot keeps its buffers).
    pub fn pop(&mut self) {
        if self.len > 0 {
            self.head = self.slot(1);
            self.len -= 1;
        }
    }

    /// The number of leading steps for which `pred` holds (they must come first, as for
    /// `slice::partition_point`).
    pub fn partition_point(&self, mut pred: impl FnMut(&StepIn<'_>) -> bool) -> usize {
        let (mut lo, mut hi) = (0, self.len);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            match self.get(mid) {
                Some(s) if pred(&s) => lo = mid + 1,
                _ => hi = mid,
            }
        }
        lo
    }

    /// Queue a copy of `s`.
    pub fn push(&mut self, s: &StepIn<'_>) {
        if s.cut.len() > self.stride {
            self.relayout(self.meta.len(), s.cut.len());
        }
        if self.len == self.meta.len() {
            self.relayout((self.meta.len() * 2).max(16), self.stride);
        }
        let at = self.slot(self.len);
        self.meta[at] = Meta {
            step: s.step,
            kind: s.kind,
            src_lane: s.src_lane,
            src_lane_seq: s.src_lane_seq,
            nc: s.cut.len(),
        };
        self.cuts[at * self.stride..][..s.cut.len()].copy_from_slice(s.cut);
        let p = &mut self.payloads[at];
        p.clear();
        p.extend_from_slice(s.payload);
        self.len += 1;
    }

    /// Room for `n` steps, every page written (startup work: no allocation or page fault on
    /// the hot path until more than `n` wait).
    pub fn prefault(&mut self, n: usize) {
        if n > self.meta.len() {
            self.relayout(n, self.stride);
        }
    }

    /// Move to `cap` slots (rounded up to a power of two) of `stride` words, oldest at 0.
    fn relayout(&mut self, cap: usize, stride: usize) {
        let cap = cap.max(self.len).max(1).next_power_of_two();
        let mut meta = vec![EMPTY; cap];
        let mut cuts = vec![0u64; cap * stride];
        let mut payloads: Vec<Vec<u8>> = (0..cap).map(|_| Vec::new()).collect();
        for i in 0..self.len {
            let at = self.slot(i);
            let m = self.meta[at];
            meta[i] = m;
            cuts[i * stride..][..m.nc].copy_from_slice(&self.cuts[at * self.stride..][..m.nc]);
            payloads[i] = std::mem::take(&mut self.payloads[at]);
        }
        self.meta = meta;
        self.cuts = cuts;
        self.payloads = payloads;
        self.stride = stride;
        self.head = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(id: u64, cut: &[u64], payload: &[u8]) -> (u64, Vec<u64>, Vec<u8>) {
        (id, cut.to_vec(), payload.to_vec())
    }

    fn push(q: &mut StepQueue, s: &(u64, Vec<u64>, Vec<u8>)) {
        q.push(&StepIn {
            step: s.0,
            kind: StepKind::Cross,
            src_lane: (s.0 % 7) as u8,
            src_lane_seq: s.0 * 3,
            cut: &s.1,
            payload: &s.2,
        });
    }

    fn same(got: StepIn<'_>, want: &(u64, Vec<u64>, Vec<u8>)) {
        assert_eq!(got.step, want.0);
        assert_eq!(got.src_lane, (want.0 % 7) as u8);
        assert_eq!(got.src_lane_seq, want.0 * 3);
        assert_eq!(got.cut, &want.1[..]);
        assert_eq!(got.payload, &want.2[..]);
    }

    /// Against a `VecDeque` model: pushes and pops interleaved across wraps, growth and a
    /// longer cut than the stride; every step comes back with exactly its own cut and payload
    /// (a reused slot's stale payload or cut words would show).
    #[test]
    fn the_queue_gives_back_each_step_as_pushed_across_wraps_and_growth() {
        let mut q = StepQueue::new(3);
        q.prefault(4);
        let mut model = std::collections::VecDeque::new();
        let mut rng = vyrn_wire::corpus::Rng::new(7);
        let mut id = 0;
        for round in 0..2_000u64 {
            if rng.below(3) != 0 || model.is_empty() {
                id += 1;
                let nc = if round == 900 {
                    5
                } else {
                    1 + rng.below(3) as usize
                };
                let cut: Vec<u64> = (0..nc as u64).map(|i| id * 10 + i).collect();
                let pay: Vec<u8> = (0..rng.below(5) as u8).map(|b| b ^ id as u8).collect();
                let s = step(id, &cut, &pay);
                push(&mut q, &s);
                model.push_back(s);
            } else {
                same(q.front().expect("a step"), &model[0]);
                q.pop();
                model.pop_front();
            }
            assert_eq!(q.len(), model.len());
            if let Some(last) = model.back() {
                same(q.get(q.len() - 1).expect("the newest"), last);
            }
            let u = model.front().map_or(0, |s| s.0) + 2;
            assert_eq!(
                q.partition_point(|s| s.step <= u),
                model.partition_point(|s| s.0 <= u)
            );
        }
        while let Some(s) = model.pop_front() {
            same(q.front().expect("a step"), &s);
            q.pop();
        }
        assert!(q.is_empty() && q.front().is_none());
        q.pop();
        assert!(q.is_empty());
    }
}
