//! The prefix rule (07 §9.3) and the choice of the next sequencer (§9.5), as pure functions of
//! the TailReports the seal leader holds.
//!
//! * `H*` = the highest `H_i` of any report: `seq_sig` makes one reporter enough.
//! * `F*`, per substream = the largest `k` such that every frame `1..=k` of the tenure is held
//!   by at least one reporter, counting each report's `F_i` and its `extra` ranges.
//! * The fetch plan: what the leader lacks of `1..=F*`, each range with a reporter that holds it
//!   ("the leader fetches the frames it lacks from their holders").
//! * `next_seq`: the first `seq_order` entry after the deposed one that was not deposed in this
//!   epoch, sent a TailReport in this failover, and reported `promotable`.

use vyrn_wire::msg::ctrl::{FrameRange, TailReport};

/// What a reporter holds of one substream: frames `1..=f_i`, and the `extra` ranges above.
#[derive(Debug, Clone, Copy)]
pub struct Holdings<'a> {
    /// `F_i`.
    pub f_i: u64,
    /// `extra`, ascending, disjoint (a checked report's).
    pub extra: &'a [FrameRange],
}

impl<'a> Holdings<'a> {
    /// Substream `stream` (0 = A, 1 = B) of `r`.
    pub fn of(r: &'a TailReport, stream: usize) -> Self {
        Holdings {
            f_i: r.f_i[stream & 1],
            extra: &r.extra[stream & 1],
        }
    }

    /// Whether frame `k` (≥ 1) is held.
    pub fn holds(&self, k: u64) -> bool {
        (k >= 1 && k <= self.f_i) || self.extra.iter().any(|x| x.a <= k && k <= x.b)
    }

    /// The held ranges, ascending: `[1, F_i]` (when `F_i ≥ 1`) then `extra`.
    pub fn ranges(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        (self.f_i >= 1)
            .then_some((1, self.f_i))
            .into_iter()
            .chain(self.extra.iter().map(|x| (x.a, x.b)))
    }
}

/// `F*` of one substream (07 §9.3 "Unsigned tail"): the largest `k` such that every frame
/// `1..=k` is held by at least one of `holders`. 0 when frame 1 is held by none.
pub fn f_star(holders: &[Holdings<'_>]) -> u64 {
    let mut ranges: Vec<(u64, u64)> = holders.iter().flat_map(|h| h.ranges()).collect();
    ranges.sort_unstable();
    let mut covered = 0u64;
    for (a, b) in ranges {
        if a > covered.saturating_add(1) {
            break;
        }
        covered = covered.max(b);
    }
    covered
}

/// `H*` (07 §9.3 "Signed part"): the highest `H_i` of the reports, 0 for none.
pub fn h_star<'a>(reports: impl IntoIterator<Item = &'a TailReport>) -> u64 {
    reports.into_iter().map(|r| r.h_i).max().unwrap_or(0)
}

/// One range of frames the leader lacks and the reporter it asks for them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fetch {
    /// First frame_seq.
    pub a: u64,
    /// Last frame_seq, ≥ `a`.
    pub b: u64,
    /// Index of the holder in the slice given to [`fetch_plan`].
    pub holder: usize,
}

/// The frames of `1..=f_star` that `mine` lacks, each maximal run with one holder: the lowest
/// index in `holders` that holds its first frame, for as long as it holds on. `f_star` must be
/// the `F*` of `holders` (every frame up to it has a holder); a frame with none ends the plan.
pub fn fetch_plan(mine: &Holdings<'_>, holders: &[Holdings<'_>], f_star: u64) -> Vec<Fetch> {
    let mut out: Vec<Fetch> = Vec::new();
    // Walk the gaps of `mine` below f_star, range by range (never frame by frame over what it
    // holds: F* may be millions of frames).
    let mut k = 1u64;
    let mut mine_ranges = mine.ranges().peekable();
    while k <= f_star {
        // Skip what mine holds.
        while let Some(&(a, b)) = mine_ranges.peek() {
            if b < k {
                mine_ranges.next();
            } else if a <= k {
                k = b + 1;
                mine_ranges.next();
            } else {
                break;
            }
        }
        if k > f_star {
            break;
        }
        // The gap runs to the next range mine holds, or to F*.
        let gap_end = mine_ranges
            .peek()
            .map_or(f_star, |&(a, _)| (a - 1).min(f_star));
        while k <= gap_end {
            let Some((holder, run_end)) = holders.iter().enumerate().find_map(|(i, h)| {
                h.ranges()
                    .find(|&(a, b)| a <= k && k <= b)
                    .map(|(_, b)| (i, b.min(gap_end)))
            }) else {
                return out;
            };
            match out.last_mut() {
                // The holder's next range goes on where its last one ended: one run.
                Some(f) if f.holder == holder && f.b + 1 == k => f.b = run_end,
                _ => out.push(Fetch {
                    a: k,
                    b: run_end,
                    holder,
                }),
            }
            k = run_end + 1;
        }
    }
    out
}

/// `REP_SealExt.next_seq` when no box may take over (07 §9.5: the book stays halted).
pub const NEXT_SEQ_NONE: u8 = 0xFF;

/// One sequencer box's standing in this failover (07 §9.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SeqStanding {
    /// Deposed earlier in this epoch.
    pub deposed: bool,
    /// Sent a TailReport in this failover.
    pub reported: bool,
    /// Its report said `promotable` (≥ REP_PROMOTE_HISTORY_S replayed, lag ≤ 2,000 µs).
    pub promotable: bool,
}

/// `next_seq` (07 §9.5): the first entry of `seq_order` after `deposed` (cyclically, the deposed
/// one excluded) whose standing is not deposed, reported and promotable; [`NEXT_SEQ_NONE`] when
/// none is. `standing[i]` is seq_order entry `i`'s. Voters recompute it and refuse a seal that
/// names another box.
pub fn next_seq(standing: &[SeqStanding], deposed: u8) -> u8 {
    let n = standing.len();
    if n == 0 || n > NEXT_SEQ_NONE as usize {
        return NEXT_SEQ_NONE;
    }
    (1..n)
        .map(|k| (deposed as usize + k) % n)
        .find(|&i| {
            let s = standing[i];
            !s.deposed && s.reported && s.promotable
        })
        .map_or(NEXT_SEQ_NONE, |i| i as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(a: u64, b: u64) -> FrameRange {
        FrameRange { a, b }
    }

    /// F* by its definition, frame by frame.
    fn f_star_naive(h: &[Holdings<'_>]) -> u64 {
        let mut k = 0;
        while h.iter().any(|x| x.holds(k + 1)) {
            k += 1;
        }
        k
    }

    #[test]
    fn f_star_is_the_union_prefix() {
        let e1 = [r(12, 15), r(20, 20)];
        let e2 = [r(16, 18)];
        let h = [
            Holdings {
                f_i: 10,
                extra: &e1,
            },
            Holdings {
                f_i: 11,
                extra: &e2,
            },
            Holdings { f_i: 3, extra: &[] },
        ];
        // 1..=11 by the second, 12..=15 and 16..=18 by extras; 19 held by nobody.
        assert_eq!(f_star(&h), 18);
        assert_eq!(f_star(&h), f_star_naive(&h));
        assert_eq!(f_star(&[]), 0);
        assert_eq!(
            f_star(&[Holdings {
                f_i: 0,
                extra: &[r(2, 9)]
            }]),
            0,
            "frame 1 held by nobody"
        );
    }

    #[test]
    fn f_star_matches_its_definition_on_many_drawn_holdings() {
        // A small deterministic generator: holdings of up to 5 reporters over 1..=40.
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        };
        for _ in 0..2000 {
            let n = 1 + next(5) as usize;
            let mut extras: Vec<Vec<FrameRange>> = Vec::new();
            let mut fis = Vec::new();
            for _ in 0..n {
                let f_i = next(20);
                let mut e = Vec::new();
                let mut at = f_i + 2 + next(3);
                while at < 40 && e.len() < 4 {
                    let b = at + next(4);
                    e.push(r(at, b));
                    at = b + 2 + next(5);
                }
                fis.push(f_i);
                extras.push(e);
            }
            let h: Vec<Holdings<'_>> = fis
                .iter()
                .zip(&extras)
                .map(|(&f_i, e)| Holdings { f_i, extra: e })
                .collect();
            let fs = f_star(&h);
            assert_eq!(fs, f_star_naive(&h));
            // The plan covers exactly what the first reporter lacks up to F*, from holders.
            let plan = fetch_plan(&h[0], &h, fs);
            for k in 1..=fs {
                let fetched: Vec<&Fetch> = plan.iter().filter(|f| f.a <= k && k <= f.b).collect();
                if h[0].holds(k) {
                    assert!(fetched.is_empty(), "k {k} is held: {plan:?}");
                } else {
                    assert_eq!(fetched.len(), 1, "k {k}: {plan:?}");
                    assert!(h[fetched[0].holder].holds(k), "k {k}: {plan:?}");
                }
            }
            assert!(plan.iter().all(|f| f.a <= f.b && f.b <= fs));
        }
    }

    #[test]
    fn the_plan_asks_each_run_of_one_holder() {
        let e0 = [r(8, 9)];
        let e1 = [r(6, 12)];
        let h = [
            Holdings { f_i: 4, extra: &e0 },
            Holdings { f_i: 5, extra: &e1 },
            Holdings {
                f_i: 14,
                extra: &[],
            },
        ];
        let fs = f_star(&h);
        assert_eq!(fs, 14);
        assert_eq!(
            fetch_plan(&h[0], &h, fs),
            vec![
                Fetch {
                    a: 5,
                    b: 7,
                    holder: 1
                },
                Fetch {
                    a: 10,
                    b: 12,
                    holder: 1
                },
                Fetch {
                    a: 13,
                    b: 14,
                    holder: 2
                },
            ]
        );
        // A leader that holds everything fetches nothing.
        assert!(fetch_plan(&h[2], &h, fs).is_empty());
    }

    #[test]
    fn next_seq_is_the_first_eligible_after_the_deposed() {
        let ok = SeqStanding {
            deposed: false,
            reported: true,
            promotable: true,
        };
        let cold = SeqStanding {
            promotable: false,
            ..ok
        };
        let silent = SeqStanding {
            reported: false,
            ..ok
        };
        let gone = SeqStanding {
            deposed: true,
            ..ok
        };
        // Primary deposed: the warm standby.
        assert_eq!(next_seq(&[gone, ok, ok], 0), 1);
        // The standby is not promotable: the first spare that is.
        assert_eq!(next_seq(&[gone, cold, silent, ok], 0), 3);
        // The standby (promoted earlier) deposed: wrap around past the end, the deposed primary
        // excluded.
        assert_eq!(next_seq(&[gone, gone, cold], 1), NEXT_SEQ_NONE);
        assert_eq!(next_seq(&[ok, gone, cold], 1), 0);
        assert_eq!(next_seq(&[gone], 0), NEXT_SEQ_NONE);
        assert_eq!(next_seq(&[], 0), NEXT_SEQ_NONE);
    }

    #[test]
    fn h_star_is_the_highest_signed_height() {
        let mut a = TailReport {
            epoch: 1,
            tenure: 0,
            reporter: 0,
            h_i: 7,
            f_i: [1, 1],
            extra: Default::default(),
            direct: Default::default(),
            t_last_rx: 0,
            replay_lag_us: 0,
            promotable: false,
            sig: [0; 64],
        };
        let mut b = a.clone();
        b.h_i = 9;
        assert_eq!(h_star([&a, &b]), 9);
        a.h_i = 12;
        assert_eq!(h_star([&a, &b]), 12);
        assert_eq!(h_star([]), 0);
    }
}
