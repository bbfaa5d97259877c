//! Oracles that share no code with what they check (07 §11, T-REP-2): [`decode`], an
//! order-stream decoder written from 07 §3 and the wire decisions alone, run beside `vyrn-wire`'s
//! on the same frames (`sim/tests/oracle_decoder.rs`): identical records, or identical error codes;
//! and [`book`], a plain price-time book run beside the engine's on the same ops
//! (`sim/tests/oracle_book.rs`): the same kind and events at every step.

pub mod book;
pub mod decode;
pub mod twin;
