//! The gate words of spec 07 §4.1–§4.2: `released[H]`, `LaneCut[l]`, `step_done`, `close_req`,
//! `seq_fenced` and `final_height`.
//!
//! Every word has exactly one writer role (INV-WRITER), and every word except [`LaneCut`] sits on
//! its own cache line ([`CachePadded`]) so that no other write invalidates the line its readers
//! poll.
//!
//! # Protocols
//!
//! * [`Released`] — `released[A]`, `released[B]` (§4.1 table, §4.2 `flush_order`). Written by
//!   its stream core only, with `Release`, after the CTPIO writes of its frame and the `sfence`;
//!   the value is the newest step whose records on that substream are out, and it only grows.
//!   The three fill TX cores load it with `Acquire` and spin until `released[A] >= need_A(s)`
//!   and `released[B] >= need_B(s)` before any fill of step `s`: **INV-REP-1** (order before
//!   response). The `Release`/`Acquire` pair makes everything the stream core did before the
//!   store (the frame bytes, the ring state) visible to a TX core that sees the value.
//!
//! * [`LaneCut`] — `LaneCut[l]` = (step, cut) (§4.1, §4.2 `flush_order`, §4.11). Written only by
//!   the stream core of `l`'s half, only after the store to `released[H]` for the frame that holds
//!   the half's record of `step`. Lane `l` answers op `q` only when it reads `cut >= q` with
//!   `Acquire`: **INV-REP-11** (every lane response is gated). The gate check is one `Acquire`
//!   load of `cut` ([`LaneCut::cut`], [`LaneCut::covers`]), and since `cut` is stored with
//!   `Release`, a lane that sees `cut >= q` also sees everything the stream core did before (the
//!   `released` store, the frame). The writer publishes non-decreasing steps and cuts (the
//!   stream core's `pending_gate` and a lane's cut only grow); that is its precondition,
//!   debug-asserted, and the pair read below relies on it.
//!
//!   *Pair consistency: a seqlock keyed by the step.* The word is 16 bytes, `align(16)`, four to a
//!   cache line (the spec's "13 lines" for 49 lanes; put the array in one `CachePadded` block), so
//!   there is no room for a separate sequence word, and Rust has no stable 128-bit atomic. The step
//!   doubles as the sequence: the writer stores `step | WRITING` (bit 63, `Relaxed`), then `cut`
//!   (`Release`), then `step` (`Release`). [`LaneCut::load`] reads `step` (`Acquire`; retry while
//!   `WRITING`), `cut` (`Acquire`), `step` again, and accepts when both step reads are equal.
//!   If `cut` came from a later store, that store's `WRITING` write happens before the second
//!   step read (`cut` is stored `Release` and loaded `Acquire`), so the second read sees the flag
//!   or a later step and the reader retries; if it came from an earlier one, the first step read
//!   (acquired from a final `Release` store that follows it) excludes it. Equal step reads with
//!   non-decreasing steps mean every store in between carried that same step, so the returned
//!   pair is one that was written: **the pair read is consistent**. Steps must stay below 2^63.
//!   The writer loads nothing: it knows what it publishes.
//!
//! * [`StepDone`] — `step_done` = (step, fill_lanes) (§4.1, §4.2 BBO step end). Written by the
//!   BBO core only, at step end, with strictly increasing steps; read by both stream cores (part
//!   D of their loop: LaneCut for lanes with fills in released steps). The same step-keyed
//!   seqlock as `LaneCut` (one writer, no separate sequence word, no load on the writer side),
//!   alone on its cache line. The pair is never torn, and a reader that gets `(s, _)` has
//!   acquired the BBO core's final store for `s`, so it sees everything the BBO core did before
//!   (the fills it pushed for `s`).
//!
//! * [`CloseReq`] — `close_req` (§3.9, §4.2): core 4 posts the height to close when its clock
//!   crosses `k × BLOCK_NS`; the BBO core takes it at step end and pushes the mark entry into
//!   `R_step`. One slot: [`CloseReq::post`] succeeds only when the slot is empty (compare-exchange,
//!   `AcqRel`), so a height is never overwritten before the BBO core has taken it (a lost height
//!   would skip a `BlockMark`); [`CloseReq::take`] is a `Relaxed` poll and, only when a request is
//!   there, a `swap` to empty (`AcqRel`), so each posted height is taken exactly once.
//!
//! * [`SeqFenced`] — `seq_fenced` (§4.2 `flush_order`, §4.8, INV-REP-6). Set once by either
//!   stream core (`fetch_or`, `Release`), read with `Acquire` before every flush by both. There is
//!   no way to clear it: a tenure that self-fenced stays silent (a new tenure builds a new word).
//!
//! * [`FinalHeight`] — `final_height` (§4.1, §6.8). The finality listener (core 51) publishes the
//!   newest finalized height with `fetch_max` (`Release`), so it is monotone even if a late, lower
//!   height is published; core 4 reads it with `Acquire` for the finality gate
//!   (`closed_height - final_height`).

use core::fmt;

use crossbeam_utils::CachePadded;

use crate::sync::{fence, spin_loop, AtomicBool, AtomicU64, Ordering};

/// `released[H]`: the newest step whose records on substream `H` are written to both paths.
#[derive(Debug, Default)]
pub struct Released(CachePadded<AtomicU64>);

impl Released {
    /// A word holding `initial` (normally the step before the tenure's first step).
    pub fn new(initial: u64) -> Self {
        Released(CachePadded::new(AtomicU64::new(initial)))
    }

    /// Publish `step` (`Release`); called by the stream core after the frame's `sfence`.
    /// `step` must not be below the current value (debug-asserted).
    #[inline]
    pub fn store(&self, step: u64) {
        debug_assert!(
            step >= self.0.load(Ordering::Relaxed),
            "INV-WRITER: released[H] has one writer, its stream core, and never moves back (07 §4.2)"
        );
        self.0.store(step, Ordering::Release);
    }

    /// The current value (`Acquire`).
    #[inline]
    pub fn load(&self) -> u64 {
        self.0.load(Ordering::Acquire)
    }

    /// Spin until the value is `>= need` (`Acquire`); returns the number of spins (0 when it
    /// already was). The TX core's INV-REP-1 wait.
    #[inline]
    pub fn wait_for(&self, need: u64) -> u64 {
        let mut spins = 0;
        while self.load() < need {
            spin_loop();
            spins += 1;
        }
        spins
    }

    /// Spin until `a >= need_a` and `b >= need_b` (§4.2, fill TX core); returns the spins.
    #[inline]
    pub fn wait_both(a: &Released, need_a: u64, b: &Released, need_b: u64) -> u64 {
        let mut spins = 0;
        while a.load() < need_a || b.load() < need_b {
            spin_loop();
            spins += 1;
        }
        spins
    }
}

/// The step-keyed seqlock behind [`LaneCut`] and [`StepDone`]: a monotone key (the step, bit 63
/// set while a store is in progress) and a value; one writer (see the module docs).
#[repr(C, align(16))]
#[derive(Debug, Default)]
struct KeyedPair {
    key: AtomicU64,
    value: AtomicU64,
}

impl KeyedPair {
    /// Bit 63 of the key word: a store is in progress.
    const WRITING: u64 = 1 << 63;

    fn new(key: u64, value: u64) -> Self {
        assert!(key < Self::WRITING, "steps must stay below 2^63");
        KeyedPair {
            key: AtomicU64::new(key),
            value: AtomicU64::new(value),
        }
    }

    /// Publish `(key, value)`; the single writer only, with non-decreasing keys.
    #[inline(always)]
    fn store(&self, key: u64, value: u64) {
        assert!(key < Self::WRITING, "steps must stay below 2^63");
        // The one writer never loads in release builds: it knows what it published.
        debug_assert!(
            key >= self.key.load(Ordering::Relaxed),
            "INV-WRITER: a published step never moves back (07 §4.1)"
        );
        self.key.store(key | Self::WRITING, Ordering::Relaxed);
        self.value.store(value, Ordering::Release);
        self.key.store(key, Ordering::Release);
    }

    /// One attempt at a consistent read; `None` if a store was in progress.
    #[inline(always)]
    fn try_load(&self) -> Option<(u64, u64)> {
        let k1 = self.key.load(Ordering::Acquire);
        if k1 & Self::WRITING != 0 {
            return None;
        }
        let value = self.value.load(Ordering::Acquire);
        let k2 = self.key.load(Ordering::Relaxed);
        (k1 == k2).then_some((k1, value))
    }

    /// A consistent pair; spins only while a store is in progress.
    #[inline(always)]
    fn load(&self) -> (u64, u64) {
        loop {
            if let Some(pair) = self.try_load() {
                return pair;
            }
            spin_loop();
        }
    }
}

/// `LaneCut[l]`: `(step, cut)`, the newest released step of the lane's half and the lane's cut
/// in it. 16 bytes, `align(16)`; see the module docs for the protocol.
#[repr(transparent)]
#[derive(Default)]
pub struct LaneCut(KeyedPair);

impl LaneCut {
    /// A word holding `(step, cut)`.
    ///
    /// # Panics
    ///
    /// If `step >= 2^63`.
    pub fn new(step: u64, cut: u64) -> Self {
        LaneCut(KeyedPair::new(step, cut))
    }

    /// Publish `(step, cut)`; the half's stream core only, after `released[H]`. Neither `step`
    /// nor `cut` may be below the current value (debug-asserted; the pair read relies on it).
    ///
    /// # Panics
    ///
    /// If `step >= 2^63`.
    #[inline]
    pub fn store(&self, step: u64, cut: u64) {
        debug_assert!(
            cut >= self.0.value.load(Ordering::Relaxed),
            "INV-REP-11: LaneCut never moves back, or an answered op would lose its cover (07 §4.11)"
        );
        self.0.store(step, cut);
    }

    /// The cut (`Acquire`): the lane's gate read.
    #[inline]
    pub fn cut(&self) -> u64 {
        self.0.value.load(Ordering::Acquire)
    }

    /// Whether op `q` may be answered: `cut >= q` (INV-REP-11).
    #[inline]
    pub fn covers(&self, q: u64) -> bool {
        self.cut() >= q
    }

    /// A consistent `(step, cut)` pair (seqlock read; spins only while a store is in progress).
    #[inline]
    pub fn load(&self) -> (u64, u64) {
        self.0.load()
    }

    /// One attempt at [`LaneCut::load`]: `None` if a store was in progress.
    #[inline]
    pub fn try_load(&self) -> Option<(u64, u64)> {
        self.0.try_load()
    }
}

impl fmt::Debug for LaneCut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (step, cut) = self.load();
        f.debug_struct("LaneCut")
            .field("step", &step)
            .field("cut", &cut)
            .finish()
    }
}

/// `step_done`: `(step, fill_lanes)`, written by the BBO core at step end; a seqlock keyed by
/// the step, on its own cache line.
#[derive(Debug, Default)]
pub struct StepDone(CachePadded<KeyedPair>);

impl StepDone {
    /// A word holding `(step, fill_lanes)`.
    ///
    /// # Panics
    ///
    /// If `step >= 2^63`.
    pub fn new(step: u64, fill_lanes: u64) -> Self {
        StepDone(CachePadded::new(KeyedPair::new(step, fill_lanes)))
    }

    /// Publish `(step, fill_lanes)`; the BBO core only, with a step not below the current one
    /// (debug-asserted).
    ///
    /// # Panics
    ///
    /// If `step >= 2^63`.
    #[inline]
    pub fn store(&self, step: u64, fill_lanes: u64) {
        self.0.store(step, fill_lanes);
    }

    /// One attempt at a consistent read: `None` if a store was in progress.
    #[inline]
    pub fn try_load(&self) -> Option<(u64, u64)> {
        self.0.try_load()
    }

    /// A consistent `(step, fill_lanes)` pair; spins only while a store is in progress.
    #[inline]
    pub fn load(&self) -> (u64, u64) {
        self.0.load()
    }
}

/// `close_req`: one pending block-close height, posted by core 4, taken by the BBO core.
#[derive(Debug)]
pub struct CloseReq(CachePadded<AtomicU64>);

impl Default for CloseReq {
    fn default() -> Self {
        CloseReq::new()
    }
}

impl CloseReq {
    /// The empty slot.
    const NONE: u64 = u64::MAX;

    /// An empty slot.
    pub fn new() -> Self {
        CloseReq(CachePadded::new(AtomicU64::new(Self::NONE)))
    }

    /// Post `height` (core 4). `Err(pending)` if the previous request has not been taken yet;
    /// keep `height` and post it again later.
    ///
    /// # Panics
    ///
    /// If `height == u64::MAX` (the empty marker).
    #[inline]
    pub fn post(&self, height: u64) -> Result<(), u64> {
        assert_ne!(height, Self::NONE, "u64::MAX is not a height");
        self.0
            .compare_exchange(Self::NONE, height, Ordering::AcqRel, Ordering::Acquire)
            .map(|_| ())
    }

    /// Take the pending height, if any (the BBO core, the single consumer). Costs one load
    /// when nothing is pending.
    #[inline]
    pub fn take(&self) -> Option<u64> {
        if self.0.load(Ordering::Relaxed) == Self::NONE {
            return None;
        }
        let h = self.0.swap(Self::NONE, Ordering::AcqRel);
        (h != Self::NONE).then_some(h)
    }

    /// The pending height, if any, without taking it.
    #[inline]
    pub fn pending(&self) -> Option<u64> {
        let h = self.0.load(Ordering::Acquire);
        (h != Self::NONE).then_some(h)
    }
}

/// `seq_fenced`: set once by either stream core, never cleared in a tenure (INV-REP-6).
#[derive(Debug, Default)]
pub struct SeqFenced(CachePadded<AtomicBool>);

impl SeqFenced {
    /// An unset word.
    pub fn new() -> Self {
        SeqFenced(CachePadded::new(AtomicBool::new(false)))
    }

    /// Set the fence (`Release`); returns `true` if this call set it, `false` if it was set
    /// already.
    #[inline]
    pub fn set(&self) -> bool {
        !self.0.fetch_or(true, Ordering::AcqRel)
    }

    /// Whether the fence is set (`Acquire`), read before every flush.
    #[inline]
    pub fn is_set(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

/// `final_height`: the newest finalized height seen; monotone.
#[derive(Debug, Default)]
pub struct FinalHeight(CachePadded<AtomicU64>);

impl FinalHeight {
    /// A word holding `initial`.
    pub fn new(initial: u64) -> Self {
        FinalHeight(CachePadded::new(AtomicU64::new(initial)))
    }

    /// Publish `height` (`fetch_max`, `Release`); returns the previous value. A lower height
    /// than the current one changes nothing.
    #[inline]
    pub fn publish(&self, height: u64) -> u64 {
        self.0.fetch_max(height, Ordering::Release)
    }

    /// The newest finalized height (`Acquire`).
    #[inline]
    pub fn load(&self) -> u64 {
        self.0.load(Ordering::Acquire)
    }
}

/// The published cut (07 §4.1: the cut core's output, one value per lane, read by the BBO core):
/// a seqlock over the lane values. One writer, which counts its own stores (`version` 1, 2, 3, …)
/// and so never loads the sequence word it writes (see the module docs on loom's reduction); any
/// number of readers.
///
/// Protocol: the writer stores `seq = 2·version − 1` (odd: a store is in progress, `Relaxed`),
/// a `Release` fence, every lane value (`Relaxed`), then `seq = 2·version` (`Release`). A reader
/// loads `seq` (`Acquire`; odd → retry), every value (`Relaxed`), an `Acquire` fence, `seq`
/// again, and accepts when both reads are equal. If a value came from a later store, the
/// writer's fence orders that store's odd `seq` before it, and the reader's fence makes its
/// second `seq` read see the odd value or a later one; if it came from an earlier store, the
/// first `seq` read (acquired from a final `Release` store that follows it) excludes it. So an
/// accepted cut is one that was stored whole: **never torn across lanes**.
#[derive(Debug)]
pub struct PublishedCut {
    seq: CachePadded<AtomicU64>,
    v: Box<[AtomicU64]>,
}

impl PublishedCut {
    /// A cut of `lanes` zeros (version 0).
    pub fn new(lanes: usize) -> Self {
        PublishedCut {
            seq: CachePadded::new(AtomicU64::new(0)),
            v: (0..lanes).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Lanes.
    pub fn lanes(&self) -> usize {
        self.v.len()
    }

    /// Publish `cut` as store number `version` (1, 2, 3, …; the single writer only).
    pub fn store(&self, version: u64, cut: &[u64]) {
        debug_assert!(version >= 1 && cut.len() == self.v.len());
        self.seq.store(2 * version - 1, Ordering::Relaxed);
        fence(Ordering::Release);
        for (w, &c) in self.v.iter().zip(cut) {
            w.store(c, Ordering::Relaxed);
        }
        self.seq.store(2 * version, Ordering::Release);
    }

    /// One attempt at a whole cut into `out`; false if a store was in progress.
    pub fn try_load(&self, out: &mut [u64]) -> bool {
        let s1 = self.seq.load(Ordering::Acquire);
        if s1 & 1 == 1 {
            return false;
        }
        for (o, w) in out.iter_mut().zip(self.v.iter()) {
            *o = w.load(Ordering::Relaxed);
        }
        fence(Ordering::Acquire);
        self.seq.load(Ordering::Relaxed) == s1
    }

    /// A whole cut into `out`; spins only while a store is in progress.
    pub fn load(&self, out: &mut [u64]) {
        while !self.try_load(out) {
            spin_loop();
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn released_store_load_wait() {
        let r = Released::new(3);
        assert_eq!(r.load(), 3);
        assert_eq!(r.wait_for(2), 0);
        r.store(7);
        assert_eq!(r.load(), 7);
        assert_eq!(Released::default().load(), 0);
        let other = Released::new(1);
        assert_eq!(Released::wait_both(&r, 7, &other, 1), 0);
    }

    #[test]
    fn released_wait_sees_data_written_before() {
        let r = Arc::new(Released::new(0));
        let data = Arc::new(AtomicU64::new(0));
        let (r2, d2) = (r.clone(), data.clone());
        let t = std::thread::spawn(move || {
            for s in 1..=1000 {
                d2.store(s * 10, Ordering::Relaxed);
                r2.store(s);
            }
        });
        for need in [1, 500, 1000] {
            r.wait_for(need);
            assert!(data.load(Ordering::Relaxed) >= need * 10);
        }
        t.join().unwrap();
    }

    #[test]
    fn lane_cut_is_monotone_and_gates() {
        let lc = LaneCut::new(0, 0);
        assert_eq!(core::mem::size_of::<LaneCut>(), 16);
        assert_eq!(core::mem::align_of::<LaneCut>(), 16);
        assert!(lc.covers(0) && !lc.covers(1));
        lc.store(5, 100);
        assert_eq!(lc.load(), (5, 100));
        assert_eq!(lc.try_load(), Some((5, 100)));
        assert!(lc.covers(100) && !lc.covers(101));
        lc.store(6, 100);
        assert_eq!(lc.load(), (6, 100));
        assert_eq!(format!("{lc:?}"), "LaneCut { step: 6, cut: 100 }");
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "never moves back")]
    fn lane_cut_regression_is_caught_in_debug() {
        LaneCut::new(5, 100).store(5, 90);
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "never moves back")]
    fn step_done_regression_is_caught_in_debug() {
        StepDone::new(5, 0).store(4, 0);
    }

    #[test]
    #[should_panic(expected = "below 2^63")]
    fn lane_cut_rejects_huge_step() {
        LaneCut::new(0, 0).store(1 << 63, 0);
    }

    #[test]
    fn lane_cut_repeated_step_keeps_pair() {
        let lc = LaneCut::new(3, 7);
        lc.store(3, 9);
        assert_eq!(lc.load(), (3, 9));
        let sd = StepDone::default();
        sd.store(0, 5);
        assert_eq!(sd.load(), (0, 5));
    }

    #[test]
    fn lane_cut_pair_never_torn_under_contention() {
        let lc = Arc::new(LaneCut::new(0, 0));
        let w = lc.clone();
        let t = std::thread::spawn(move || {
            for s in 1..=200_000u64 {
                w.store(s, s * 3);
            }
        });
        let (mut last_step, mut last_cut) = (0, 0);
        loop {
            let (s, c) = lc.load();
            assert_eq!(c, s * 3, "torn pair");
            assert!(s >= last_step && c >= last_cut, "went back");
            (last_step, last_cut) = (s, c);
            let cut = lc.cut();
            assert!(cut >= last_cut);
            if s == 200_000 {
                break;
            }
        }
        t.join().unwrap();
    }

    #[test]
    fn step_done_pair_never_torn_under_contention() {
        let sd = Arc::new(StepDone::new(0, 0));
        assert_eq!(sd.load(), (0, 0));
        let w = sd.clone();
        let t = std::thread::spawn(move || {
            for s in 1..=200_000u64 {
                w.store(s, s.rotate_left(17) ^ 0xABCD);
            }
        });
        let mut last = 0;
        loop {
            let (s, lanes) = sd.load();
            assert_eq!(
                lanes,
                if s == 0 {
                    0
                } else {
                    s.rotate_left(17) ^ 0xABCD
                }
            );
            assert!(s >= last);
            last = s;
            if s == 200_000 {
                break;
            }
        }
        t.join().unwrap();
        assert_eq!(
            sd.try_load(),
            Some((200_000, 200_000u64.rotate_left(17) ^ 0xABCD))
        );
    }

    #[test]
    fn close_req_holds_one_height() {
        let c = CloseReq::default();
        assert_eq!(c.take(), None);
        assert_eq!(c.pending(), None);
        c.post(10).unwrap();
        assert_eq!(c.post(11), Err(10));
        assert_eq!(c.pending(), Some(10));
        assert_eq!(c.take(), Some(10));
        assert_eq!(c.take(), None);
        c.post(11).unwrap();
        assert_eq!(c.take(), Some(11));
    }

    #[test]
    fn close_req_every_height_taken_once_in_order() {
        const H: u64 = 50_000;
        let c = Arc::new(CloseReq::new());
        let poster = c.clone();
        let t = std::thread::spawn(move || {
            for h in 0..H {
                while poster.post(h).is_err() {
                    std::thread::yield_now(); // 2-core CI: let the other side run
                }
            }
        });
        let mut expect = 0;
        while expect < H {
            if let Some(h) = c.take() {
                assert_eq!(h, expect);
                expect += 1;
            }
        }
        t.join().unwrap();
    }

    #[test]
    fn seq_fenced_sets_once() {
        let f = SeqFenced::new();
        assert!(!f.is_set());
        assert!(f.set());
        assert!(f.is_set());
        assert!(!f.set());
        assert!(f.is_set());
    }

    #[test]
    fn final_height_is_monotone() {
        let f = FinalHeight::new(0);
        assert_eq!(f.publish(5), 0);
        assert_eq!(f.publish(3), 5);
        assert_eq!(f.load(), 5);
        f.publish(9);
        assert_eq!(f.load(), 9);
    }
}
