//! Run vyrn's market deterministically: the BBO core's price-time order book (missing-chapters
//! §3), the same code live and in replay (INV-DET).
//!
//! # Status
//! Issue 3 in progress: the book (`book`) is built and tested. Lanes (dedupe, risk, pre-encode),
//! the cut, the BBO core's step loop with deadline admission and the early StepRecord push,
//! responses, replay mode and snapshots are still to come; `docs/engine.md` tracks them.

pub mod book;

pub use book::{Book, BookConfig, BookReject, Event, Op, OpKind, RestingOrder, Side};
