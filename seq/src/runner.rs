//! The tile runtime the box runs on ([`vyrn_tile`], re-exported: `Task`, `Runner`, `Seeded`,
//! `Clock`, placement and the watchdog).

pub use vyrn_tile::*;
