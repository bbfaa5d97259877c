//! The replica's front (07 §4.9–§4.10, §5.3–§5.7, §6.4): every input from the network up to the
//! verdict a vote asks. Dependency order, bottom first: `order_rx` → `quarantine` → `decode` →
//! `data` → `verdict` → `core`; `data_down` beside `data`. Nothing here depends on
//! [`crate::node`] or [`crate::vote`].

pub mod core;
pub mod data;
pub mod data_down;
pub mod decode;
pub mod failover;
pub mod order_rx;
pub mod quarantine;
pub mod verdict;
