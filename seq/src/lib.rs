//! The sequencer box (07 §4): the engine's tiles (lanes, cut core, BBO core) joined to the stream
//! cores that frame the order stream on two substreams and write it to both replication paths
//! *before* any response that depends on it leaves (INV-FRAME-FIRST), and the TX tile that
//! holds each fill until both release words cover it (INV-REP-1).
//!
//! One implementation of every tile ([`tiles`]), each with a non-blocking `poll` over its own
//! endpoints of the 07 §4.1 shared memory; two runners ([`runner`]): pinned threads in
//! production, a seeded scheduler in the tests (T-REP-1) and the simulator. [`ports`] puts the
//! box on its UDP ports. The test oracle, the voter doubles and the one-thread harness live in
//! `testkit` (feature `testkit`), out of the default build. `docs/seq.md` lists what is built
//! and what is left.

pub mod boxcfg;
pub mod control;
pub mod hasher;
pub mod mem;
pub mod metrics;
pub mod ports;
pub mod retain;
pub mod runner;
/// Secrets in memory (moved to the home crate; re-exported for the box's callers).
pub use vyrn_home::secret;
pub mod shm;
pub mod signer;
pub mod standby;
pub mod stream;
pub mod takeover;
pub mod tiles;

#[cfg(feature = "testkit")]
pub mod testkit;

pub use shm::{FrameInfo, SeqConfig};
pub use stream::{GateMode, StreamCore};
