//! Catch-up, measured (07 §7.6): how long a replica that started behind the home took to replay
//! up to the home's final height, and at how many times the home's block rate. Replay starts
//! from the newest snapshot on its own disk that verifies (else the stream's first block); the
//! stream is decoded from its start (its own order and block journals first, then the box,
//! peers and their journals), and replay drops what the snapshot holds. A snapshot fetched
//! from peers (an empty disk) is not built.

/// A replica's catch-up as measured once it reached the home's final height.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CaughtUp {
    /// The first block this process replayed.
    pub first: u64,
    /// The final height it reached with every block through it replayed.
    pub height: u64,
    /// The home's final height when this process first learned it (how far behind it started).
    pub final_at_start: u64,
    /// From this process's first poll to then, ns.
    pub elapsed_ns: u64,
    /// Blocks replayed per second over that time.
    pub blocks_per_s: f64,
    /// Measured against the stream's head instead (its frame_seq on substream A when this
    /// process first saw a live frame; 0 when measured against the final height): a replica
    /// started on an empty disk can replay past the home's head before its consensus engine
    /// learns a final height.
    pub head_frame: u64,
    /// The home's block rate (`1 / block_ns`).
    pub production_per_s: f64,
    /// The snapshot replay started from (its height): `first` is the block after it.
    pub snapshot: Option<u64>,
}

impl CaughtUp {
    /// The catch-up rate as a multiple of the home's block rate.
    pub fn ratio(&self) -> f64 {
        if self.production_per_s > 0.0 {
            self.blocks_per_s / self.production_per_s
        } else {
            0.0
        }
    }
}

/// Fewer blocks behind than this at the first final height seen is no catch-up (a replica
/// started with its home): nothing is reported.
const BEHIND_MIN: u64 = 8;

/// Fewer frames behind the stream's head than this at the first live frame is no catch-up.
const FRAMES_BEHIND_MIN: u64 = 256;

/// The tracker: fed the decoded headers and polled with the replayed step and the final height.
#[derive(Debug, Default)]
pub(super) struct CatchUpClock {
    /// The home's block period, ns (the rate's yardstick).
    block_ns: u64,
    started: u64,
    first: u64,
    /// The newest decoded block's (height, last_step).
    decoded: (u64, u64),
    final_at_start: u64,
    /// The stream's head at the first live frame (0: none seen yet; `u64::MAX`: not behind).
    head_frame: u64,
    /// Caught up with that head, measured then (reported if the final height comes too late).
    by_head: Option<CaughtUp>,
    /// The snapshot replay started from, if any (its height).
    pub(super) snapshot: Option<u64>,
    /// Set once measured (or once it is clear there was nothing to catch up).
    pub(super) done: Option<Option<CaughtUp>>,
}

impl CatchUpClock {
    /// For a home whose block period is `block_ns`.
    pub(super) fn new(block_ns: u64) -> Self {
        CatchUpClock {
            block_ns,
            ..Default::default()
        }
    }

    /// Replay started from the snapshot of `(height, last_step)` (07 §7.6): the blocks it
    /// replays begin after it; those decoded up to it are dropped, not replayed.
    pub(super) fn after_snapshot(mut self, loaded: Option<(u64, u64)>) -> Self {
        if let Some((h, last_step)) = loaded {
            self.first = h + 1;
            self.snapshot = Some(h);
            self.decoded = (h, last_step);
        }
        self
    }

    /// A decoded block.
    pub(super) fn on_header(&mut self, h: u64, last_step: u64) {
        if self.first == 0 {
            self.first = h;
        }
        if h > self.decoded.0 {
            self.decoded = (h, last_step);
        }
    }

    /// One check at `now`: `replayed`, the last step replay applied; `final_height`, the
    /// home's as this replica's engine knows it. Returns the measurement the moment it
    /// completes.
    /// `frames`: substream A's (contiguous, highest seen) frame_seq.
    pub(super) fn poll(
        &mut self,
        now: u64,
        replayed: u64,
        final_height: u64,
        frames: (u64, u64),
    ) -> Option<CaughtUp> {
        if self.done.is_some() {
            return None;
        }
        if self.started == 0 {
            self.started = now.max(1);
        }
        self.watch_head(now, replayed, frames);
        if final_height == 0 {
            return None;
        }
        if self.final_at_start == 0 {
            self.final_at_start = final_height;
            let have = if self.decoded.0 > 0 && replayed >= self.decoded.1 {
                self.decoded.0
            } else {
                self.first.saturating_sub(1)
            };
            if final_height.saturating_sub(have) < BEHIND_MIN {
                // Not behind the final height now; behind the head at start, and caught up
                // with it before the final height was known: that is the measurement.
                self.done = Some(self.by_head);
                return self.by_head;
            }
        }
        let (h, last_step) = self.decoded;
        if h == 0 || h < final_height || replayed < last_step {
            return None;
        }
        let c = self.measure(now, 0);
        self.done = Some(Some(c));
        Some(c)
    }

    /// The stream's head at the first live frame, and the moment replay passed it.
    fn watch_head(&mut self, now: u64, replayed: u64, (contiguous, high): (u64, u64)) {
        if self.head_frame == 0 && high > 0 {
            self.head_frame = if high.saturating_sub(contiguous) >= FRAMES_BEHIND_MIN {
                high
            } else {
                u64::MAX
            };
        }
        let (h, last_step) = self.decoded;
        if self.by_head.is_none()
            && self.head_frame != u64::MAX
            && self.head_frame > 0
            && contiguous >= self.head_frame
            && h > 0
            && replayed >= last_step
        {
            self.by_head = Some(self.measure(now, self.head_frame));
        }
    }

    fn measure(&self, now: u64, head_frame: u64) -> CaughtUp {
        let h = self.decoded.0;
        let elapsed_ns = now.saturating_sub(self.started).max(1);
        let blocks = h + 1 - self.first.max(1);
        CaughtUp {
            first: self.first.max(1),
            height: h,
            final_at_start: self.final_at_start,
            elapsed_ns,
            blocks_per_s: blocks as f64 * 1e9 / elapsed_ns as f64,
            head_frame,
            production_per_s: if self.block_ns > 0 {
                1e9 / self.block_ns as f64
            } else {
                0.0
            },
            snapshot: self.snapshot,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A replica started with its home reports nothing; one that starts 300 blocks behind
    /// reports when its replay passes the final height, with the rate against production.
    #[test]
    fn catch_up_is_measured_only_from_behind() {
        let mut live = CatchUpClock::new(20_000_000);
        live.on_header(1, 10);
        assert_eq!(live.poll(5, 10, 1, (0, 0)), None);
        assert_eq!(live.done, Some(None));

        let mut late = CatchUpClock::new(20_000_000);
        assert_eq!(late.poll(1_000, 0, 0, (0, 0)), None, "no final height yet");
        late.on_header(1, 10);
        assert_eq!(late.poll(2_000, 0, 300, (0, 0)), None);
        late.on_header(300, 3000);
        assert_eq!(late.poll(3_000, 2999, 300, (0, 0)), None, "not replayed");
        late.on_header(310, 3100);
        assert_eq!(late.poll(4_000, 3100, 320, (0, 0)), None, "final moved on");
        late.on_header(320, 3200);
        let c = late
            .poll(1_000_000_000 + 1_000, 3200, 320, (0, 0))
            .expect("caught up");
        assert_eq!((c.first, c.height, c.final_at_start), (1, 320, 300));
        assert!((c.blocks_per_s - 320.0).abs() < 0.01, "{c:?}");
        assert!((c.ratio() - 6.4).abs() < 0.01, "{c:?}");
        assert_eq!(late.poll(2_000_000_000, 4000, 400, (0, 0)), None, "once");
    }

    /// A replica on an empty disk sees the stream's head (frame 30,000) long before its
    /// consensus engine learns a final height; it replays past that head first. The
    /// measurement is taken when it passed the head, and reported once the final height is
    /// known and it is not behind it.
    #[test]
    fn catch_up_before_the_final_height_is_known_is_measured_against_the_head() {
        let mut c = CatchUpClock::new(20_000_000);
        assert_eq!(c.poll(1_000, 0, 0, (0, 30_000)), None);
        c.on_header(1, 10);
        c.on_header(400, 4000);
        assert_eq!(c.poll(500_000_000, 4000, 0, (20_000, 30_010)), None);
        c.on_header(431, 4310);
        assert_eq!(
            c.poll(1_000_000_000 + 1_000, 4310, 0, (30_000, 30_050)),
            None,
            "no final height yet"
        );
        c.on_header(481, 4810);
        let m = c
            .poll(2_000_000_000, 4810, 481, (35_000, 35_000))
            .expect("measured at the head");
        assert_eq!((m.first, m.height, m.head_frame), (1, 431, 30_000));
        assert!((m.blocks_per_s - 431.0).abs() < 0.01, "{m:?}");
        assert_eq!(
            c.poll(3_000_000_000, 5000, 500, (36_000, 36_000)),
            None,
            "once"
        );
        // Started with the home (a few frames behind): nothing.
        let mut live = CatchUpClock::new(20_000_000);
        live.on_header(1, 10);
        assert_eq!(live.poll(5, 10, 0, (10, 12)), None);
        assert_eq!(live.poll(6, 10, 1, (12, 12)), None);
        assert_eq!(live.done, Some(None));
    }
}
