//! Encode and decode every byte format of vyrn's replication spec (07): frames, order-stream
//! sections and records, block headers, data frames, consensus and control messages, client
//! packets.
//!
//! # Terminology
//! Names follow spec 07 exactly (`PacketRecord`, `StepRecord`, `REP_E_CUT`, `need_A`, …); each
//! item cites the section it implements. Where 07 can be read two ways the reading of
//! `shared/design/wire-decisions.md` is used, cited as "wire-decisions N".
//!
//! # Status
//! Pure codecs: no I/O, no clocks (the caller passes time in), no global state.
#![forbid(unsafe_code)]

pub mod consts;
pub mod corpus;
pub mod decoder;
pub mod encoder;
pub mod error;
pub mod frame;
pub mod header;
pub mod layout;
pub mod leb;
pub mod msg;
pub mod records;

pub use decoder::{BlockRoots, DecState, NullSink, Pos, Sink};
pub use error::{Malformed, RepE, RepErr};
pub use frame::{FrameHeader, FrameKind, Heartbeat};
pub use header::{BlockHeader, Hash};
pub use layout::Layout;
pub use records::*;
