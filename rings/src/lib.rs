//! Placeholder, filled by the rings work.
