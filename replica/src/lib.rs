//! The replica role of 07 (`vyrn-replica`). Built so far: the block journal of 07 §8.2–§8.3 —
//! block records across drive directories on io_uring + O_DIRECT or a portable backend, the
//! mirrored cert journal, the two indexes, the retention ring and startup recovery
//! ([`journal`]). Order RX, repair, the decoder tile, the data join, the vote verdict, replay
//! and the binaries are later slices of issue 12 (`docs/replica.md`).

pub mod journal;
