//! `vyrn-sim`: the deterministic simulator (07 §1: `vyrn-sim` runs the whole protocol with a
//! simulated network).
//!
//! Today it runs the voting side of a home ([`voting`]): n voters, each the production
//! [`vyrn_consensus::Desk`] and [`vyrn_consensus::App`] around commonware's Simplex engine, on
//! commonware's deterministic runtime and simulated p2p network, fed by a scripted sequencer
//! (signed, chained headers closed at a fixed block interval) and per-voter ledgers that model
//! when headers and payloads arrive, payloads that never do and roots that contradict. The
//! sequencer's finality listener is the production [`vyrn_consensus::FinalityListener`] and its
//! finality gate is modelled with 07 §6.8's constants. Faults: links cut for a while (a crashed or
//! partitioned voter), lossy and jittery links, and (feature `mocks`) commonware's Byzantine
//! voters. A seed fixes everything: the same seed gives the same run and the same auditor digest.
//!
//! [`oracle`] holds what checks the production code from outside it: a second order-stream
//! decoder written from 07 §3 alone (T-REP-2).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod home;
pub mod oracle;
pub mod voting;
