//! Placeholder, filled by the nic work.
