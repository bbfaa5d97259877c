//! Catch-up, measured (07 §7.6): how long a replica that started behind the home took to replay
//! up to the home's final height, and at how many times the home's block rate. Today's path is
//! replay from the stream's first block (its own order and block journals first, then the
//! box, peers and their journals); loading a snapshot first is not built.

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
    /// The home's block rate (`1 / block_ns`).
    pub production_per_s: f64,
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
    pub(super) fn poll(&mut self, now: u64, replayed: u64, final_height: u64) -> Option<CaughtUp> {
        let block_ns = self.block_ns;
        if self.done.is_some() {
            return None;
        }
        if self.started == 0 {
            self.started = now.max(1);
        }
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
                self.done = Some(None);
                return None;
            }
        }
        let (h, last_step) = self.decoded;
        if h == 0 || h < final_height || replayed < last_step {
            return None;
        }
        let elapsed_ns = now.saturating_sub(self.started).max(1);
        let blocks = h + 1 - self.first.max(1);
        let c = CaughtUp {
            first: self.first.max(1),
            height: h,
            final_at_start: self.final_at_start,
            elapsed_ns,
            blocks_per_s: blocks as f64 * 1e9 / elapsed_ns as f64,
            production_per_s: if block_ns > 0 {
                1e9 / block_ns as f64
            } else {
                0.0
            },
        };
        self.done = Some(Some(c));
        Some(c)
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
        assert_eq!(live.poll(5, 10, 1), None);
        assert_eq!(live.done, Some(None));

        let mut late = CatchUpClock::new(20_000_000);
        assert_eq!(late.poll(1_000, 0, 0), None, "no final height yet");
        late.on_header(1, 10);
        assert_eq!(late.poll(2_000, 0, 300), None);
        late.on_header(300, 3000);
        assert_eq!(late.poll(3_000, 2999, 300), None, "not replayed");
        late.on_header(310, 3100);
        assert_eq!(late.poll(4_000, 3100, 320), None, "final moved on");
        late.on_header(320, 3200);
        let c = late
            .poll(1_000_000_000 + 1_000, 3200, 320)
            .expect("caught up");
        assert_eq!((c.first, c.height, c.final_at_start), (1, 320, 300));
        assert!((c.blocks_per_s - 320.0).abs() < 0.01, "{c:?}");
        assert!((c.ratio() - 6.4).abs() < 0.01, "{c:?}");
        assert_eq!(late.poll(2_000_000_000, 4000, 400), None, "once");
    }
}
