//! The sequencer box (07 §4): the engine's tiles (lanes, cut core, BBO core) joined to the stream
//! cores that frame the order stream on two substreams and write it to both replication paths
//! *before* any response that depends on it leaves (INV-FRAME-FIRST), and the TX tile that
//! holds each fill until both release words cover it (INV-REP-1).
//!
//! Issue 4, first slice: every tile has a non-blocking `poll` over the box's shared memory
//! ([`home::Shared`]: rings as queues, gate words as fields), so one code path runs under the
//! seeded scheduler of the tests (T-REP-1) and, later, pinned on cores with `vyrn-rings`.
//! `docs/seq.md` lists what is built and what is left.

pub mod boxcfg;
pub mod check;
pub mod control;
pub mod doubles;
pub mod home;
pub mod mem;
pub mod net;
pub mod netbox;
pub mod secret;
pub mod signer;
pub mod stream;
pub mod threaded;
pub mod voter;

pub use home::{FrameInfo, SeqConfig, SeqHome, Shared, Tile, WireEvent};
pub use stream::{GateMode, StreamCore};
pub use voter::VoterDouble;
