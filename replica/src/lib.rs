//! The replica role of 07 (`vyrn-replica`), laid out as its pipeline:
//!
//! - [`front`]: what the network brings in, up to the vote — order RX over both paths with
//!   holes, NACKs and peer repair ([`front::order_rx`]), peer frames held until a signed header
//!   vouches for them ([`front::quarantine`]), the decoder ([`front::decode`]), the data side
//!   (07 §5.3–§5.6: boxes, store, join, fetch, mismatch; [`front::data`]), data-box failover
//!   ([`front::data_down`]), the per-block verdict of 07 §6.4 ([`front::verdict`]), all composed
//!   into one tile ([`front::core::ReplicaCore`]).
//! - [`replay`]: the engine replayed from the wire (07 §7.1–§7.3), inline, on its own thread, or
//!   split across lane workers.
//! - [`disk`]: the block journal and cert journal (07 §8.2–§8.3), the order journal, snapshots
//!   (07 §7.5), block records and the in-memory frame store that serves peers.
//! - [`vote`]: the Simplex voter over the verdict (07 §6).
//! - [`node`]: the process on its ports — config, sockets, the journal writer, control traffic
//!   and counters.
//!
//! What is built and what is not is in `docs/replica.md`.

pub mod disk;
pub mod front;
#[cfg(feature = "homekit")]
pub mod homekit;
pub mod node;
pub mod recovery;
pub mod replay;
pub mod vote;
