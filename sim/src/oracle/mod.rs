//! Oracles that share no code with what they check (07 §11, T-REP-2): [`decode`], an
//! order-stream decoder written from 07 §3 and the wire decisions alone, run beside `vyrn-wire`'s
//! on the same frames (`sim/tests/oracle_decoder.rs`): identical records, or identical error codes.

pub mod decode;
