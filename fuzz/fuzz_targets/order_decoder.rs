//! Fuzz the replica's order-stream decoder (07 §3.12) on capture-format input
//! (`u32 LE length ‖ frame` records); the harness is `vyrn_wire::corpus::fuzz_order_decoder`.
//! The seed corpus holds generated valid captures, so the fuzzer starts deep inside valid
//! streams. Invariants: no panic, no hang, errors sticky per substream.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| vyrn_wire::corpus::fuzz_order_decoder(data));
