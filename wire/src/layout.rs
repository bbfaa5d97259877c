//! Lanes, halves and substreams (07 §2.2, §3.5; missing-chapters §0 profiles).

use crate::consts::*;

/// How lanes map to substreams, and which lanes are pooled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Lanes, ≤ 64 (07 §3.4).
    pub n_lanes: u8,
    /// Substreams: 2 (REF, dev) or 1 (CONSUMER, AWS).
    pub n_streams: u8,
    /// Bit l set: lane l is pooled (AcctTake allowed, shared pool session table).
    pub pool_mask: u64,
}

impl Layout {
    /// The REF layout: 49 lanes, two substreams, pooled lanes 42–48.
    pub const fn reference() -> Self {
        let mut pool = 0u64;
        let mut l = REF_POOL_LANES.start;
        while l < REF_POOL_LANES.end {
            pool |= 1 << l;
            l += 1;
        }
        Layout {
            n_lanes: N_LANES_REF as u8,
            n_streams: 2,
            pool_mask: pool,
        }
    }

    /// A layout with `n_lanes` lanes, two substreams and no pool.
    pub const fn two_streams(n_lanes: u8) -> Self {
        Layout {
            n_lanes,
            n_streams: 2,
            pool_mask: 0,
        }
    }

    /// Validate: 1..=64 lanes, 1 or 2 streams, pool inside the lanes.
    pub fn validate(&self) -> Result<(), &'static str> {
        if self.n_lanes == 0 || self.n_lanes as usize > N_LANES_MAX {
            return Err("n_lanes must be 1..=64");
        }
        if self.n_streams != 1 && self.n_streams != 2 {
            return Err("n_streams must be 1 or 2");
        }
        if self.n_streams == 2 && self.n_lanes < 2 {
            return Err("two substreams need at least 2 lanes");
        }
        let lanes_mask = if self.n_lanes == 64 {
            u64::MAX
        } else {
            (1u64 << self.n_lanes) - 1
        };
        if self.pool_mask & !lanes_mask != 0 {
            return Err("pool lanes outside n_lanes");
        }
        Ok(())
    }

    /// `N_HALF = (N_LANES + 1) / 2` with two substreams; all lanes with one.
    #[inline(always)]
    pub const fn n_half(&self) -> usize {
        if self.n_streams == 2 {
            (self.n_lanes as usize).div_ceil(2)
        } else {
            self.n_lanes as usize
        }
    }

    /// The first lane of substream `s`'s half.
    #[inline(always)]
    pub const fn half_start(&self, s: u8) -> usize {
        if s == 0 {
            0
        } else {
            self.n_half()
        }
    }

    /// Lanes in substream `s`'s half (`|H|`).
    #[inline(always)]
    pub const fn half_len(&self, s: u8) -> usize {
        if s == 0 {
            self.n_half()
        } else {
            self.n_lanes as usize - self.n_half()
        }
    }

    /// The substream that carries lane `l`.
    #[inline(always)]
    pub const fn stream_of(&self, l: usize) -> u8 {
        if self.n_streams == 2 && l >= self.n_half() {
            1
        } else {
            0
        }
    }

    /// Home substream of a step with this source lane (A when `src = 0xFF`, 07 §3.8).
    #[inline(always)]
    pub const fn home_of(&self, src_lane: u8) -> u8 {
        if src_lane == SRC_NONE {
            0
        } else {
            self.stream_of(src_lane as usize)
        }
    }

    /// Is lane `l` pooled?
    #[inline(always)]
    pub const fn is_pool(&self, l: usize) -> bool {
        l < 64 && self.pool_mask & (1 << l) != 0
    }
}
