//! The cut core (07 §3.8, missing-chapters §3): reads the lanes' published counters (acquire,
//! in the threaded runner) and publishes the two half-cuts, each monotone (INV-CUT-MONO), at
//! most every `CUT_REFRESH_NS`.

use vyrn_wire::consts::N_LANES_MAX;
use vyrn_wire::layout::Layout;

/// Cut refresh period (07 §3.8 size budget: each cut core publishes every ≤ 100 ns).
pub const CUT_REFRESH_NS: u64 = 100;

/// The cut core of one home (both halves; the threaded runner splits it per half).
#[derive(Debug, Clone)]
pub struct CutCore {
    layout: Layout,
    cut: [u64; N_LANES_MAX],
    last: Option<u64>,
    refresh_ns: u64,
}

impl CutCore {
    /// Cut 0 everywhere, refreshing at most every `refresh_ns` (0: every call).
    pub fn new(layout: Layout, refresh_ns: u64) -> Self {
        CutCore {
            layout,
            cut: [0; N_LANES_MAX],
            last: None,
            refresh_ns,
        }
    }

    /// The published cut, `n_lanes` values.
    pub fn cut(&self) -> &[u64] {
        &self.cut[..self.layout.n_lanes as usize]
    }

    /// Read the lane counters at `now` and publish; returns whether the cut moved. A counter
    /// below the published value (never expected: lane counters only grow) is ignored, so each
    /// half-cut stays monotone (INV-CUT-MONO).
    pub fn refresh(&mut self, now: u64, counter: impl Fn(usize) -> u64) -> bool {
        if let Some(t) = self.last {
            if now < t.saturating_add(self.refresh_ns) {
                return false;
            }
        }
        self.last = Some(now);
        let mut moved = false;
        for l in 0..self.layout.n_lanes as usize {
            let c = counter(l);
            if c > self.cut[l] {
                self.cut[l] = c;
                moved = true;
            }
        }
        moved
    }

    /// Restore (snapshot).
    pub fn set(&mut self, cut: &[u64]) {
        self.cut[..cut.len()].copy_from_slice(cut);
    }
}
