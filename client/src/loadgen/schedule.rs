//! The open-loop schedule: packet `k` is due at `start + k / rate`, whatever happened to the
//! packets before it. A generator that falls behind sends the late packets at once and
//! measures their latency from the *intended* time, so a stall shows up in the percentiles
//! instead of thinning the samples (coordinated omission).

/// Intended send times at a fixed rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenLoop {
    start_ns: u64,
    per_s: u64,
    next: u64,
    /// Largest `now − intended` seen when a packet was handed out.
    pub lag_max_ns: u64,
}

impl OpenLoop {
    /// `per_s` packets per second from `start_ns`.
    pub fn new(start_ns: u64, per_s: u64) -> Self {
        assert!(per_s > 0, "rate must be positive");
        OpenLoop {
            start_ns,
            per_s,
            next: 0,
            lag_max_ns: 0,
        }
    }

    /// Intended time of packet `k`.
    pub fn intended(&self, k: u64) -> u64 {
        self.start_ns + (k as u128 * 1_000_000_000 / self.per_s as u128) as u64
    }

    /// Packets handed out so far.
    pub fn sent(&self) -> u64 {
        self.next
    }

    /// The next packet's `(index, intended time)` if it is due at `now`; each call hands out
    /// one, so a caller behind schedule loops until `None` and never skips one.
    pub fn due(&mut self, now: u64) -> Option<(u64, u64)> {
        let t = self.intended(self.next);
        if t > now {
            return None;
        }
        let k = self.next;
        self.next += 1;
        self.lag_max_ns = self.lag_max_ns.max(now - t);
        Some((k, t))
    }

    /// Give packet `k` back (it could not be sent now): it stays due at its intended time.
    pub fn undo(&mut self) {
        self.next = self.next.saturating_sub(1);
    }
}
