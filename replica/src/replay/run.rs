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

/// A [`SinkReport`]'s bytes beside a snapshot ([`SinkReport::to_bytes`]).
pub const SINK_REPORT_LEN: usize = 48;

impl SinkReport {
    /// Its bytes (responses u64 LE, events u64 LE, digest), kept beside a snapshot.
    pub fn to_bytes(&self) -> [u8; SINK_REPORT_LEN] {
        let mut b = [0u8; SINK_REPORT_LEN];
        b[..8].copy_from_slice(&self.responses.to_le_bytes());
        b[8..16].copy_from_slice(&self.events.to_le_bytes());
        b[16..].copy_from_slice(&self.digest);
        b
    }

    /// Read back from [`SinkReport::to_bytes`]; None unless exactly its length.
    pub fn from_bytes(b: &[u8]) -> Option<Self> {
        let b: &[u8; SINK_REPORT_LEN] = b.try_into().ok()?;
        let mut digest = [0u8; 32];
        digest.copy_from_slice(&b[16..]);
        let mut w = [0u8; 8];
        w.copy_from_slice(&b[..8]);
        let responses = u64::from_le_bytes(w);
        w.copy_from_slice(&b[8..16]);
        Some(SinkReport {
            responses,
            events: u64::from_le_bytes(w),
            digest,
        })
    }

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
    /// Go on from what a sink had seen when a snapshot was taken (07 §7.6: a replica restored
    /// from it replays only what follows). Default: nothing kept.
    fn resume(&mut self, _r: &SinkReport) {}
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
