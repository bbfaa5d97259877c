//! The home: what every role of a vyrn home shares — the box, the voters, the data boxes and
//! the standby read one file (07 §13.1's membership and the rest of the deployment), so its
//! schema, its checks and the facts derived from it are written once, here, beside the roles
//! rather than inside any one of them.
//!
//! * [`file`](mod@file): the home file (TOML) — `[box]`, `[account.ID]`, `[session.ID]`, `[voter.N]`,
//!   `[databox.N]`, `[standby]` — read into [`BoxConfig`] (the sequencer's view, with its
//!   seed) or [`HomeConfig`] (every other role's); key files; the dev and REF writers; the
//!   startup checks.
//! * [`secret`]: secrets in memory ([`secret::Seed32`]).
//! * [`PATH_GROUPS`], [`quorum`]: facts of 07 every role uses.
//!
//! It depends on the codecs (`vyrn-wire`) and the engine's config types only: a data box reads
//! its home without linking the sequencer or the consensus engine.

pub mod file;
pub mod secret;

pub use file::*;

use std::net::Ipv4Addr;

/// The multicast groups of replication paths A and B (07 §3.1): the box sends each path's
/// frames to its group, every replica joins both on its own interface on that path's network.
pub const PATH_GROUPS: [Ipv4Addr; 2] = [
    Ipv4Addr::new(239, 255, 75, 1),
    Ipv4Addr::new(239, 255, 75, 2),
];

/// f of a home of `n` voters: the Byzantine voters it tolerates, ⌊(n − 1) / 3⌋ (07 §10; 1 in
/// BASE and in CHAIN).
pub const fn max_faults(n: usize) -> usize {
    n.saturating_sub(1) / 3
}

/// Q of a home of `n` voters: n − f (07 §6.3, §9.2; 3 of 4 in BASE, 4 of 5 in CHAIN).
pub const fn quorum(n: usize) -> usize {
    n - max_faults(n)
}

#[cfg(test)]
mod tests {
    #[test]
    fn quorum_is_n_minus_f() {
        assert_eq!(super::quorum(4), 3);
        assert_eq!(super::quorum(5), 4);
        assert_eq!(super::quorum(7), 5);
        assert_eq!(super::quorum(1), 1);
    }
}
