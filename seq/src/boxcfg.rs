//! The home file, as the box reads it: [`vyrn_home`]'s schema and checks (re-exported, so the
//! box's callers keep one path), and the box's own [`SeqConfig`] built from it.

pub use vyrn_home::*;

use crate::shm::SeqConfig;

/// The box's [`SeqConfig`] from its home file.
pub trait SeqConfigOf {
    /// The tiles' configuration: the engine, the epoch, the block period, the seed, the
    /// voters, the frame ring.
    fn seq_config(&self) -> SeqConfig;
}

impl SeqConfigOf for BoxConfig {
    fn seq_config(&self) -> SeqConfig {
        SeqConfig {
            engine: self.engine.clone(),
            epoch: self.epoch,
            block_ns: self.block_ns,
            // SeqConfig holds a plain array; the tiles take their copies from it.
            seq_key: *self.seq_key.expose(),
            voters: self.voters,
            rtx_ring_bytes: self.rtx_ring_bytes,
            // The epoch's primary (seq_order index 0) at tenure 0 (07 §2.2).
            tenure: crate::shm::TenureId::FIRST,
        }
    }
}
