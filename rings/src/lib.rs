//! Connect the sequencer's core-pinned threads with lock-free rings and gate words (spec 07
//! §4.1–§4.2).
//!
//! * [`spsc`] — the bounded single-producer single-consumer ring behind `R_pkt[l]`,
//!   `R_hash8[l]` and `R_hash32[l]` (64 Ki entries each).
//! * [`multi`] — the one-writer, `N`-cursor ring behind `R_step` (core 2 writes; stream-A,
//!   stream-B and the order hasher each read every entry through their own cursor; 16 Ki
//!   entries; INV-WRITER).
//! * [`words`] — the single-writer gate words: [`words::Released`] (`released[A]`,
//!   `released[B]`, INV-REP-1), [`words::LaneCut`] (INV-REP-11), [`words::StepDone`],
//!   [`words::CloseReq`], [`words::SeqFenced`] and [`words::FinalHeight`].
//!
//! Each module states its protocol (who writes which word, with which ordering, and why that is
//! enough) in its own documentation. Every ring and word is checked with loom models
//! (`RUSTFLAGS="--cfg loom" cargo test -p vyrn-rings --release --lib -- loom`).
//!
//! # Hot path
//!
//! Rings allocate their slots once, in `channel`; after that no operation allocates, takes a
//! lock or makes a syscall. A push or pop is a slot copy plus one `Release` store of the side's
//! own index (batch operations: one store per batch), and it reads the other side's cache line
//! only when its cached copy of the other index says full or empty. Word operations are single
//! loads and stores (a seqlock retry loop for the pair words, spinning only while the single
//! writer is mid-store). The `wait_*` helpers spin with `core::hint::spin_loop`; they never park.

#![warn(missing_docs)]

mod sync;

pub mod multi;
pub mod spsc;
pub mod words;

#[cfg(all(test, loom))]
mod loom_tests;
