//! What every replay thread shares, at the bottom of `replay` (the front tile, the replay tile
//! and the lane workers all use it; it uses none of them): the report a sink gives across the
//! ring (the thread loop and its idle policy are the tile runtime's: `vyrn_tile::run_loop`).

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
