//! Speak the exchange's client protocol: build and tag request packets, send copy 1 to the
//! sequencer and copy 2 to the data home, resend by the rules of 07 §9.5 and §5.7, and turn
//! responses into execution, durable and final facts that are never merged (07 §6.9).
//!
//! # Terminology
//!
//! - **Session**: one client session (`SessionId`), with its keys `K_seq` (tags requests) and
//!   `K_out` (verifies responses) and its gapless `pkt_seq` from 1 (missing-chapters §2).
//! - **Copy 1 / copy 2**: the same request packet sent to the sequencer and to the session's
//!   data home (07 §2.1).
//! - **Executed / durable / final**: the three facts of 07 §6.9 (`DUR_PATHS`, `DUR_QUORUM`,
//!   `FINAL`), reported as three kinds of [`Event`].
//!
//! # Shape
//!
//! [`Session`] is a pure state machine (sans-IO, clock-free: every call takes `now`):
//! [`Session::submit`] queues packets, [`Session::transmits`] yields `(destination, bytes)`,
//! [`Session::handle_packet`] takes received bytes, [`Session::poll`] runs the timers and
//! [`Session::poll_event`] hands out events. [`Driver`] moves bytes between sessions and a
//! [`vyrn_nic::Port`]. `loadgen` (feature `loadgen`, not in the library a client links) is the core
//! of the load generator. `testkit` (feature `testkit`, off in
//! the binaries' build) holds the test doubles (a sequencer double answering per the §9.5 table, a data box double, and an
//! address-routing port).
//!
//! ```
//! use vyrn_client::{OrderReq, Session, SessionConfig, Event};
//! use vyrn_wire::msg::client::Side;
//!
//! let seq = "10.0.0.1:9000".parse().unwrap();
//! let data = vec!["10.0.1.1:7402".parse().unwrap()];
//! let cfg = SessionConfig::new(7, 0x1001, [1; 16], [2; 16], seq, data, 0);
//! let mut s = Session::new(cfg, 0, 0).unwrap();
//! let sub = s
//!     .submit(0, &[OrderReq::Gtc { side: Side::Buy, tick: 1000, qty: 5 }])
//!     .unwrap();
//! assert_eq!(sub.pkt_seq, 1);
//! // Two transmits: copy 1 to the sequencer, copy 2 to the data home.
//! let dests: Vec<_> = s.transmits().map(|t| t.dest).collect();
//! assert_eq!(dests.len(), 2);
//! s.consume_transmits(2);
//! // Feed responses with `s.handle_packet(now, bytes)`, run `s.poll(now)`, then:
//! while let Some(ev) = s.poll_event() {
//!     if let Event::Exec(e) = ev { println!("{:?}", e.kind); }
//! }
//! ```
//!
//! # Status
//!
//! See `docs/client.md` for the protocol as a client sees it and what is not done.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod config;
pub mod driver;
pub mod facts;
#[cfg(feature = "loadgen")]
pub mod loadgen;
pub mod packet;
mod retain;
pub mod session;
#[cfg(feature = "testkit")]
pub mod testkit;

pub use config::{ConfigError, SessionConfig};
pub use driver::{Driver, DriverCounters};
pub use facts::{Height, StepId};
pub use session::{
    Counters, Event, Exec, ExecKind, MsgRef, OrderId, OrderReq, OrderView, PktCopy, Session,
    SubmitError, Submitted, Transmit, Uncertainty,
};
