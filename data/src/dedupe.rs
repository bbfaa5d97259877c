//! Dedupe tile (07 §5.2 step 3): per session, `hi` (the highest stored `pkt_seq`) and a 256-bit
//! window below it. A `pkt_seq` above `hi` or unmarked inside the window is new; a marked one
//! is a repeat (the store then compares full hashes); one more than 255 below `hi` is late.

/// Width of the per-session window, in packets (07 §5.2).
pub const WINDOW_BITS: u32 = 256;

/// What the window says about a `pkt_seq`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// Not seen: store it (then [`Window::mark`]).
    New,
    /// Already stored under this `pkt_seq`: compare full hashes.
    Repeat,
    /// Below the window (`pkt_seq ≤ hi − 256`): dropped.
    Late,
}

/// One session's window. Bit `d` of `bits` says `hi − d` is stored, for `d` in `0..256`.
/// `hi = 0` means nothing stored yet (`pkt_seq` starts at 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Window {
    hi: u32,
    bits: [u64; 4],
}

impl Window {
    /// The highest stored `pkt_seq` (0: none).
    pub fn hi(&self) -> u32 {
        self.hi
    }

    /// Classify `pkt_seq` (≥ 1) without changing the window.
    #[inline]
    pub fn check(&self, pkt_seq: u32) -> Verdict {
        if pkt_seq > self.hi {
            return Verdict::New;
        }
        let d = self.hi - pkt_seq;
        if d >= WINDOW_BITS {
            return Verdict::Late;
        }
        if self.bits[(d / 64) as usize] & (1 << (d % 64)) != 0 {
            Verdict::Repeat
        } else {
            Verdict::New
        }
    }

    /// Record `pkt_seq` as stored. A `pkt_seq` above `hi` slides the window up (a jump of 256
    /// or more clears it); one inside the window sets its bit; a late one changes nothing.
    #[inline]
    pub fn mark(&mut self, pkt_seq: u32) {
        if pkt_seq > self.hi {
            self.shift(pkt_seq - self.hi);
            self.hi = pkt_seq;
            self.bits[0] |= 1;
            return;
        }
        let d = self.hi - pkt_seq;
        if d < WINDOW_BITS {
            self.bits[(d / 64) as usize] |= 1 << (d % 64);
        }
    }

    /// Move every bit `by` places toward higher distances (older), dropping those past 255.
    fn shift(&mut self, by: u32) {
        if by >= WINDOW_BITS {
            self.bits = [0; 4];
            return;
        }
        let words = (by / 64) as usize;
        let bits = by % 64;
        let old = self.bits;
        for i in (0..4).rev() {
            let mut v = 0u64;
            if i >= words {
                v = old[i - words] << bits;
                if bits != 0 && i > words {
                    v |= old[i - words - 1] >> (64 - bits);
                }
            }
            self.bits[i] = v;
        }
    }
}

/// The dedupe tile: one [`Window`] per session index.
#[derive(Debug)]
pub struct Dedupe {
    windows: Box<[Window]>,
}

impl Dedupe {
    /// `sessions` empty windows.
    pub fn new(sessions: usize) -> Self {
        Dedupe {
            windows: vec![Window::default(); sessions].into_boxed_slice(),
        }
    }

    /// Classify `pkt_seq` of session `sidx`.
    #[inline]
    pub fn check(&self, sidx: u32, pkt_seq: u32) -> Verdict {
        self.windows[sidx as usize].check(pkt_seq)
    }

    /// Record `pkt_seq` of session `sidx` as stored.
    #[inline]
    pub fn mark(&mut self, sidx: u32, pkt_seq: u32) {
        self.windows[sidx as usize].mark(pkt_seq)
    }

    /// Session `sidx`'s window.
    pub fn window(&self, sidx: u32) -> &Window {
        &self.windows[sidx as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    #[test]
    fn window_in_order_then_repeats() {
        let mut w = Window::default();
        for s in 1..=300 {
            assert_eq!(w.check(s), Verdict::New);
            w.mark(s);
            assert_eq!(w.check(s), Verdict::Repeat);
        }
        assert_eq!(w.hi(), 300);
        // 300 − 255 = 45 is the oldest inside; 44 is late.
        assert_eq!(w.check(45), Verdict::Repeat);
        assert_eq!(w.check(44), Verdict::Late);
        assert_eq!(w.check(1), Verdict::Late);
        assert_eq!(w.check(301), Verdict::New);
    }

    #[test]
    fn window_out_of_order_inside() {
        let mut w = Window::default();
        w.mark(10);
        for s in [3, 9, 1, 7] {
            assert_eq!(w.check(s), Verdict::New);
            w.mark(s);
        }
        for s in 1..=10 {
            let want = if [1, 3, 7, 9, 10].contains(&s) {
                Verdict::Repeat
            } else {
                Verdict::New
            };
            assert_eq!(w.check(s), want, "{s}");
        }
        assert_eq!(w.hi(), 10);
    }

    #[test]
    fn window_jumps() {
        let mut w = Window::default();
        w.mark(5);
        // A jump of exactly 256: 5 falls out (distance 256).
        w.mark(261);
        assert_eq!(w.check(5), Verdict::Late);
        assert_eq!(w.check(6), Verdict::New);
        // A jump far beyond the window clears it.
        w.mark(100_000);
        assert_eq!(w.check(261), Verdict::Late);
        assert_eq!(w.check(99_745), Verdict::New);
        assert_eq!(w.check(99_744), Verdict::Late);
        // A jump of 255 keeps the old hi at distance 255.
        let mut w = Window::default();
        w.mark(1);
        w.mark(256);
        assert_eq!(w.check(1), Verdict::Repeat);
        w.mark(257);
        assert_eq!(w.check(1), Verdict::Late);
        // Jumps of 64 and 65 carry bits across words.
        let mut w = Window::default();
        for s in 1..=64 {
            w.mark(s);
        }
        w.mark(64 + 65);
        for s in 1..=64 {
            assert_eq!(w.check(s), Verdict::Repeat);
        }
        assert_eq!(w.check(65), Verdict::New);
        assert_eq!(w.check(u32::MAX), Verdict::New);
        w.mark(u32::MAX);
        assert_eq!(w.check(u32::MAX), Verdict::Repeat);
        assert_eq!(w.check(1), Verdict::Late);
    }

    proptest! {
        /// The window agrees with a set model: new iff never marked and not below the window.
        #[test]
        fn window_matches_set_model(seqs in proptest::collection::vec(1u32..2000, 1..400)) {
            let mut w = Window::default();
            let mut seen = BTreeSet::new();
            let mut hi = 0u32;
            for s in seqs {
                let want = if hi >= WINDOW_BITS && s <= hi - WINDOW_BITS {
                    Verdict::Late
                } else if seen.contains(&s) {
                    Verdict::Repeat
                } else {
                    Verdict::New
                };
                prop_assert_eq!(w.check(s), want);
                if want == Verdict::New {
                    w.mark(s);
                    seen.insert(s);
                    hi = hi.max(s);
                }
            }
            prop_assert_eq!(w.hi(), hi);
        }
    }
}
