//! The durable and final facts of 07 §6.9, kept apart from execution and from each other.
//!
//! - **Executed** (`DUR_PATHS`) is the response itself: the session reports it as
//!   [`crate::Event::Exec`] and nothing here is involved.
//! - **Durable** (`DUR_QUORUM`): a fill at step `s` is durable once a `Durable{step}` watermark
//!   with `step ≥ s` has arrived.
//! - **Final** (`FINAL`): a fill at step `s` is final once a `Final{height}` watermark covers
//!   the height of the block that holds `s`.
//!
//! **How the client learns step → height.** A `Fill` record carries its StepId but no height;
//! only `Durable{step, height}` pairs a step with a height. We read that height as the height
//! of the block that holds `step` (07 §6.9, `REP_DurableMark`). Steps and heights grow
//! together (a block is a range of steps), so for a fill at `s` the first pair `(S, H)` with
//! `S ≥ s` bounds its height: `height(s) ≤ H`. The fill is reported final when
//! `Final.height ≥ H`. The bound is conservative (never early) and at most about one block
//! late, because a `Durable` watermark comes at least once per millisecond and a block is one
//! millisecond. The consequence is that the final fact of a fill is only reported after a
//! `Durable` watermark covering it has arrived. The durable fact is not inferred from the
//! final one or the other way round; the `Durable` record only lends its height.
//!
//! Records that carry no StepId (`Ack`, `CancelAck`, `Out`, `Reject`) cannot be placed under a
//! watermark at all; see `docs/client.md`.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// StepId (missing-chapters §1).
pub type StepId = u64;
/// Block height (missing-chapters §1).
pub type Height = u64;

/// Most `(step, height)` pairs kept to bound a late fill's height (4 s of 1 ms watermarks).
const MARKS_MAX: usize = 4096;

/// A fact that became true for one fill.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fact {
    Durable {
        tag: u32,
        step: StepId,
    },
    Final {
        tag: u32,
        step: StepId,
        height: Height,
    },
    /// The fill's tenure ended in a seal that does not hold its step (07 §9.6): it is in no
    /// final log.
    Reverted {
        tag: u32,
        step: StepId,
    },
}

/// The two watermarks and the fills waiting for them.
#[derive(Debug)]
pub(crate) struct Facts {
    durable_step: Option<StepId>,
    final_height: Option<Height>,
    /// Recent `Durable` pairs, step ascending.
    marks: VecDeque<(StepId, Height)>,
    /// Fills not yet durable: (step, tag), lowest step first.
    await_durable: BinaryHeap<Reverse<(StepId, u32)>>,
    /// Durable fills not yet final: (height bound, step, tag), lowest bound first.
    await_final: BinaryHeap<Reverse<(Height, StepId, u32)>>,
    max: usize,
    /// Fills not tracked because `max` were already waiting.
    pub overflow: u64,
}

impl Facts {
    pub fn new(max: usize) -> Self {
        Facts {
            durable_step: None,
            final_height: None,
            marks: VecDeque::with_capacity(MARKS_MAX),
            await_durable: BinaryHeap::with_capacity(max.min(1 << 16)),
            await_final: BinaryHeap::with_capacity(max.min(1 << 16)),
            max,
            overflow: 0,
        }
    }

    /// The `DUR_QUORUM` watermark: every step ≤ it is durable.
    pub fn durable_step(&self) -> Option<StepId> {
        self.durable_step
    }

    /// The `FINAL` watermark: every height ≤ it is final.
    pub fn final_height(&self) -> Option<Height> {
        self.final_height
    }

    /// Fills waiting for a fact.
    pub fn pending(&self) -> usize {
        self.await_durable.len() + self.await_final.len()
    }

    /// The height bound of step `s`: the first known pair at or above it.
    fn height_bound(&self, s: StepId) -> Option<Height> {
        let i = self.marks.partition_point(|&(st, _)| st < s);
        self.marks.get(i).map(|&(_, h)| h)
    }

    /// Track a new fill at `step`; facts already true are reported at once. Returns false when
    /// the fill cannot be tracked (too many waiting).
    pub fn add_fill(&mut self, tag: u32, step: StepId, out: &mut impl FnMut(Fact)) -> bool {
        if self.pending() >= self.max {
            self.overflow += 1;
            return false;
        }
        if self.durable_step.is_some_and(|d| step <= d) {
            out(Fact::Durable { tag, step });
            self.await_or_final(tag, step, out);
        } else {
            self.await_durable.push(Reverse((step, tag)));
        }
        true
    }

    fn await_or_final(&mut self, tag: u32, step: StepId, out: &mut impl FnMut(Fact)) {
        // A durable step always has a covering pair: the pair that made it durable is newest.
        let Some(h) = self.height_bound(step) else {
            debug_assert!(false, "durable step without a covering mark");
            return;
        };
        if self.final_height.is_some_and(|f| h <= f) {
            out(Fact::Final {
                tag,
                step,
                height: h,
            });
        } else {
            self.await_final.push(Reverse((h, step, tag)));
        }
    }

    /// A `Durable{step, height}` watermark (07 §6.9 `DUR_QUORUM`).
    pub fn on_durable(&mut self, step: StepId, height: Height, out: &mut impl FnMut(Fact)) {
        if self.durable_step.is_some_and(|d| step <= d) {
            return; // a stale or repeated mark: it says nothing new
        }
        if self.marks.back().is_some_and(|&(_, h)| height < h) {
            return; // height went down while the step went up: not a valid mark, ignore it
        }
        self.durable_step = Some(step);
        if self.marks.len() == MARKS_MAX {
            self.marks.pop_front();
        }
        self.marks.push_back((step, height));
        while let Some(&Reverse((s, tag))) = self.await_durable.peek() {
            if s > step {
                break;
            }
            self.await_durable.pop();
            out(Fact::Durable { tag, step: s });
            self.await_or_final(tag, s, out);
        }
    }

    /// A `TenureEnd{height, last_step}` notice (07 §9.4, §9.6): the tenure that made every fill
    /// waiting here ended in a final seal, block `height`, at step `last_step`. A fill at a
    /// step ≤ `last_step` is durable and final (the seal's certificate covers every height up
    /// to `height`); one above was reverted. The next tenure's steps start at `last_step + 1`
    /// and its heights at `height + 1`: marks above the seal are dropped, and the watermarks
    /// stand at the seal.
    pub fn on_tenure_end(&mut self, height: Height, last_step: StepId, out: &mut impl FnMut(Fact)) {
        let mut waiting: Vec<(StepId, u32, bool)> = Vec::new();
        waiting.extend(
            self.await_durable
                .drain()
                .map(|Reverse((s, t))| (s, t, false)),
        );
        waiting.extend(
            self.await_final
                .drain()
                .map(|Reverse((_, s, t))| (s, t, true)),
        );
        waiting.sort_unstable();
        for (step, tag, durable) in waiting {
            if step > last_step {
                out(Fact::Reverted { tag, step });
                continue;
            }
            if !durable {
                out(Fact::Durable { tag, step });
            }
            out(Fact::Final { tag, step, height });
        }
        while self.marks.back().is_some_and(|&(s, _)| s >= last_step) {
            self.marks.pop_back();
        }
        self.marks.push_back((last_step, height));
        self.durable_step = Some(last_step);
        self.final_height = Some(self.final_height.map_or(height, |f| f.max(height)));
    }

    /// A `Final{height}` watermark (07 §6.9 `FINAL`).
    pub fn on_final(&mut self, height: Height, out: &mut impl FnMut(Fact)) {
        if self.final_height.is_some_and(|f| height <= f) {
            return;
        }
        self.final_height = Some(height);
        while let Some(&Reverse((h, s, tag))) = self.await_final.peek() {
            if h > height {
                break;
            }
            self.await_final.pop();
            out(Fact::Final {
                tag,
                step: s,
                height: h,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(f: impl FnOnce(&mut Facts, &mut dyn FnMut(Fact))) -> Vec<Fact> {
        let mut facts = Facts::new(100);
        let mut v = Vec::new();
        f(&mut facts, &mut |x| v.push(x));
        v
    }

    #[test]
    fn durable_then_final_through_the_height_bound() {
        let v = run(|f, out| {
            let mut o = |x| out(x);
            f.add_fill(1, 10, &mut o);
            f.add_fill(2, 25, &mut o);
            f.on_final(100, &mut o); // no mark yet: nothing can be final
            f.on_durable(12, 3, &mut o); // covers step 10 with height ≤ 3
            f.on_durable(30, 4, &mut o); // covers 25 with height ≤ 4
        });
        assert_eq!(
            v,
            vec![
                Fact::Durable { tag: 1, step: 10 },
                Fact::Final {
                    tag: 1,
                    step: 10,
                    height: 3
                },
                Fact::Durable { tag: 2, step: 25 },
                Fact::Final {
                    tag: 2,
                    step: 25,
                    height: 4
                },
            ]
        );
    }

    #[test]
    fn a_tenure_end_makes_the_sealed_fills_final_and_reverts_the_rest() {
        let v = run(|f, out| {
            let mut o = |x| out(x);
            f.add_fill(1, 10, &mut o);
            f.add_fill(2, 20, &mut o);
            f.add_fill(3, 31, &mut o);
            f.on_durable(12, 3, &mut o); // fill 1 durable, final waits for height 3
            f.on_final(2, &mut o);
            // The seal: block 5 ends at step 30. Fill 2 (step 20) is in it; fill 3 is not.
            f.on_tenure_end(5, 30, &mut o);
            // The next tenure: steps from 31, heights from 6.
            f.add_fill(4, 31, &mut o);
            f.on_durable(33, 6, &mut o);
            f.on_final(6, &mut o);
        });
        assert_eq!(
            v,
            vec![
                Fact::Durable { tag: 1, step: 10 },
                Fact::Final {
                    tag: 1,
                    step: 10,
                    height: 5
                },
                Fact::Durable { tag: 2, step: 20 },
                Fact::Final {
                    tag: 2,
                    step: 20,
                    height: 5
                },
                Fact::Reverted { tag: 3, step: 31 },
                Fact::Durable { tag: 4, step: 31 },
                Fact::Final {
                    tag: 4,
                    step: 31,
                    height: 6
                },
            ]
        );
    }

    #[test]
    fn final_waits_for_its_height() {
        let v = run(|f, out| {
            let mut o = |x| out(x);
            f.add_fill(1, 10, &mut o);
            f.on_durable(12, 3, &mut o);
            f.on_final(2, &mut o);
            f.on_final(2, &mut o);
            f.on_final(3, &mut o);
            // A late fill below the durable watermark: durable at once, final at once.
            f.add_fill(9, 11, &mut o);
            f.on_durable(11, 3, &mut o); // stale, ignored
        });
        assert_eq!(v.len(), 4);
        assert_eq!(
            v[1],
            Fact::Final {
                tag: 1,
                step: 10,
                height: 3
            }
        );
        assert_eq!(v[2], Fact::Durable { tag: 9, step: 11 });
    }
}
