//! Sequencer failover at a voter (07 §9): detection and deposition ([`depose`], §9.1–§9.2),
//! the prefix rule and the next sequencer ([`prefix`], §9.3, §9.5), this replica's TailReport
//! ([`report`]), the seal's header and proposal and a voter's check of them ([`seal`], §9.4).
//!
//! Pure state machines and functions: the node feeds them its order RX's suspicion, the peers'
//! `Silence` messages and the standby's report, and sends what they ask for; the simulator and
//! the tests drive them the same way.

pub mod depose;
pub mod prefix;
pub mod report;
pub mod seal;
pub mod tail;
