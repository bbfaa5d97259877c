//! The replica role of 07 (`vyrn-replica`). Built so far: the block journal of 07 §8.2–§8.3 —
//! block records across drive directories on io_uring + O_DIRECT or a portable backend, the
//! mirrored cert journal, the two indexes, the retention ring and startup recovery
//! ([`journal`]); order RX over both paths with holes, NACKs, peer repair requests, RepAcks
//! and the path alarms ([`order_rx`]); the peer frame store that serves `RepairReq`s
//! ([`frame_store`]) from memory and then from the order journal ([`order_journal`]); the decoder tile with block heights and the sequencer-fault record
//! ([`decode`]); the per-block verdict of 07 §6.4 that a vote calls ([`verdict`]); replay from
//! the wire (07 §7.1, [`replay`]); the data side — data frames, the replica's own hashes, the
//! join, fetches, mismatches and `data_root` (07 §5.3–§5.6, [`data_side`]); all of them composed
//! into one tile ([`core::ReplicaCore`]). The process on its ports is [`node`]; what is built and what
//! is not is in `docs/replica.md`.

pub mod core;
pub mod data_down;
pub mod data_side;
pub mod decode;
pub mod frame_store;
#[cfg(feature = "homekit")]
pub mod homekit;
pub mod journal;
pub mod node;
pub mod order_journal;
pub mod order_rx;
pub mod quarantine;
pub mod record;
pub mod replay;
pub mod replay_split;
pub mod replay_tile;
pub mod snapshots;
pub mod verdict;
pub mod voter;
