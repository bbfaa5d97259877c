//! Run vyrn's market deterministically (missing-chapters §3, 07 §4.1–§4.2, §4.11, §7.1, §7.5,
//! §9.5): lanes, the cut core and the BBO core with its price-time book, the same code live and
//! in replay (INV-DET), and snapshots.
//!
//! No I/O and no clock reads: time comes in as an argument. Each role is a state machine a
//! runner drives — [`home::LiveEngine`] and [`home::ReplayEngine`] on one thread here; the
//! sequencer box pins the same tiles to cores with the rings of `vyrn-rings`.
//!
//! - [`lane`]: dedupe (07 §9.5), tag, parse, risk, LaneSeq, pre-encoded PacketRecord (§3.6),
//!   batched BLAKE3 (§3.7), lane-local answers gated by LaneCut (§4.11), step events → responses.
//! - [`cut`]: the monotone half-cuts (INV-CUT-MONO).
//! - [`bbo`]: one step per op in `rx_ts` order, kinds Cross/Improve/Idle/Shed/Control/Seal,
//!   StepRecord before fills, events tagged `(step, need_A, need_B)`.
//! - [`book`]: the price-time book.
//! - [`resp`]: response packets, `resp_seq`, the hot response ring.
//! - [`snapshot`]: sections 1–7, the state commitment, restore.
#![forbid(unsafe_code)]

pub mod bbo;
pub mod book;
pub mod config;
pub mod cut;
pub mod hash;
pub mod home;
pub mod lane;
pub mod load;
pub mod promote;
pub mod resp;
pub mod snapcodec;
pub mod snapshot;
pub mod stepq;
pub mod workload;

pub use bbo::{Bbo, ControlReq, Fwd, LaneEvent, Outcome, StepIn, StepOut};
pub use book::{Book, BookConfig, BookReject, Event, Op, OpKind, RestingOrder, Side};
pub use config::{AccountCfg, EngineConfig, SessionCfg};
pub use home::{
    Capture, EngineSink, KeyOnly, LiveEngine, LoggedStep, ReplayEngine, ReplayError, Unhashed,
};
pub use lane::{Lane, LaneDrop, Verdict};
pub use promote::Handover;
pub use resp::{Gate, RespOut};
