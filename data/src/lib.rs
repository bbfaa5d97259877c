//! Keep copy 2 of every client packet: parse, authenticate, dedupe, hash, store and fan it out
//! to every replica, and serve it again on request (the data tier box, 07 §5).
//!
//! # Pipeline (07 §5.2)
//!
//! ```text
//! clients ─► Parse ─► Mac ─► Dedupe ─► full_hash ─► Store ─► FanOut ─► DATA frames ─► replicas
//!            │        │       │                      │ ring + 2 indexes   DATA_HB when idle
//!            drop_*   DataBadMac  Repeat: same → drop_duplicate,
//!                     → sequencer different → CopyConflict + both packets → sequencer
//! replicas ─► DataFetch (range / key) ─► FETCH_RESP from the ring
//!          ─► DataDown, DataRedirect ─► Failover ─► DataRedirect record ─► clients (07 §5.7)
//! ```
//!
//! Each stage is a tile, a struct that owns its state and exposes one pure step:
//! [`ingest::Parse`], [`ingest::Mac`], [`dedupe::Dedupe`], [`ingest::full_hash`],
//! [`store::Store`], [`fanout::FanOut`], [`failover::Failover`]. [`DataBox`] runs them to
//! completion per packet on one thread and collects what they send in an [`out::OutQueue`];
//! [`driver::Driver`] connects it to [`vyrn_nic::Port`]s. No tile reads a clock (time is an
//! argument) or does I/O.
//!
//! # Hot path
//!
//! Per packet ([`DataBox::on_packet`]): **no allocation, no lock, no syscall**. The ring, both
//! indexes, the frame log, the session tables and every out buffer are allocated by
//! [`DataBox::new`], sized from [`DataConfig`], and never grow. The driver receives and sends
//! with the port's batch calls (`recv_batch`, `send_batch`), one call per port per batch. The
//! control path (fetches, failover relays) may allocate: encoding a relay builds a `Vec` of
//! records.
//!
//! Bad input never panics: every malformed packet ends as one [`IngestError`] and one counter,
//! every malformed control message as a [`CtrlError`] and a counter; the accounting identity
//! `rx_packets = stored + conflicts + Σ drop_*` holds at all times ([`Counters::balanced`]).
//!
//! # Terminology
//!
//! Names follow 07: `pkt_hash`, `data_seq`, `DATA_HB`, `FETCH_RESP`, `DataFetch`, `DataBadMac`,
//! `CopyConflict`, `DataDown`, `DataRedirect`, `resend_from`, `REP_DATA_RING_S`,
//! `REP_DATA_BATCH_US`. *Ring seq*: the box-local sequence number of a stored packet.
//!
//! # Status
//!
//! Built and tested, one box per thread. Not done: RSS sharding of ingest over
//! several cores (each shard would need its own fan-out stream), CHAIN's `K_com` tags, the
//! `SeqChange` relay of 07 §9.5. `docs/data.md` has the details and the measured figures.
#![forbid(unsafe_code)]

pub mod config;
pub mod counters;
pub mod databox;
pub mod dedupe;
pub mod driver;
pub mod failover;
pub mod fanout;
#[cfg(feature = "home")]
pub mod home;
pub mod ingest;
pub mod out;
pub mod store;

pub use config::{ConfigError, DataConfig, DestConfig, RingConfig, SessionConfig};
pub use counters::Counters;
pub use databox::{Accepted, CtrlError, DataBox, BAD_MAC_REPORTS_PER_S};
pub use driver::{Driver, DriverError};
pub use ingest::IngestError;
