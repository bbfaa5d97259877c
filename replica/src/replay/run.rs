//! What every replay thread shares, at the bottom of `replay` (the front tile, the replay tile
//! and the lane workers all use it; it uses none of them): the report a sink gives across the
//! ring, and the thread loop with its idle policy.

use std::sync::atomic::{AtomicBool, Ordering};

use vyrn_engine::home::EngineSink;
use vyrn_wire::header::Hash;

/// What a sink reports across the ring (the replica's digest sink fills it; others need not).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SinkReport {
    /// First-copy responses.
    pub responses: u64,
    /// Lane events.
    pub events: u64,
    /// The sink's digest.
    pub digest: Hash,
}

impl SinkReport {
    /// Add what another sink saw (the replay lanes' sinks, `replay_split`): counts add, and the
    /// digest — a multiset sum of 64-bit words — adds word by word.
    pub fn merge(&mut self, o: &SinkReport) {
        self.responses += o.responses;
        self.events += o.events;
        for i in 0..4 {
            let w = |d: &Hash| {
                let mut b = [0u8; 8];
                b.copy_from_slice(&d[8 * i..8 * i + 8]);
                u64::from_le_bytes(b)
            };
            let sum = w(&self.digest).wrapping_add(w(&o.digest));
            self.digest[8 * i..8 * i + 8].copy_from_slice(&sum.to_le_bytes());
        }
    }
}

/// A sink that can say what it saw, for [`ReplayProgress::sink`](crate::replay::tile::ReplayProgress::sink).
pub trait ReportingSink: EngineSink {
    /// A snapshot (default: nothing).
    fn report(&self) -> SinkReport {
        SinkReport::default()
    }
}

/// The engine's counting sink reports its count as responses (benches).
impl ReportingSink for vyrn_engine::home::CountingSink {
    fn report(&self) -> SinkReport {
        SinkReport {
            responses: self.0,
            ..SinkReport::default()
        }
    }
}

/// How the replay thread waits when there is nothing to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Idle {
    /// Spin (a dedicated core: 07 §7.2's map).
    Spin,
    /// Yield, then sleep 200 µs at a time after a run of idle polls (a shared box).
    Backoff,
}

/// A tile thread's loop (the replay thread's, and the replay lanes' in `replay_split`): pinned
/// to `core` if given, `poll` until `stop`, waiting as `idle` says when a poll did nothing.
pub fn poll_until(
    stop: &AtomicBool,
    core: Option<usize>,
    idle: Idle,
    mut poll: impl FnMut() -> bool,
) {
    if let Some(c) = core {
        pin_to(c);
    }
    let mut idle_polls = 0u32;
    while !stop.load(Ordering::Acquire) {
        if poll() {
            idle_polls = 0;
            continue;
        }
        idle_polls = idle_polls.saturating_add(1);
        match idle {
            Idle::Spin => std::hint::spin_loop(),
            Idle::Backoff if idle_polls < 64 => std::hint::spin_loop(),
            Idle::Backoff if idle_polls < 256 => std::thread::yield_now(),
            // 200 µs: a shared box's replay thread wakes 5k times a second when idle
            // (20 µs slowed the other roles' threads on two cores).
            Idle::Backoff => std::thread::sleep(std::time::Duration::from_micros(200)),
        }
    }
}

/// Pin the calling thread to `core` (best effort, as the sequencer's runner pins its tiles: a
/// core outside the process's set is left alone).
fn pin_to(core: usize) {
    let _ = core_affinity::set_for_current(core_affinity::CoreId { id: core });
}
