//! Fuzz the client packet parsers (missing-chapters §2): requests (structure, tag, every
//! message) and responses. Invariants: no panic; the full hash ignores the resend flag.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vyrn_wire::msg::client::{Request, RequestPacket, Response};

const KEY: [u8; 16] = *b"fuzz-key-0123456";

fuzz_target!(|data: &[u8]| {
    if let Ok(r) = Request::parse(data) {
        for m in r.msgs() {
            let _ = m;
        }
        let h = r.full_hash();
        let mut flipped = data.to_vec();
        flipped[3] ^= 1;
        if let Ok(r2) = Request::parse(&flipped) {
            assert_eq!(r2.full_hash(), h, "full hash reads byte 3 as 0");
        }
        let _ = r.verify_tag(&KEY);
    }
    let _ = RequestPacket::parse(data, &KEY);
    let _ = Response::parse(data, &KEY);
});
