//! Fuzz the client packet parsers (missing-chapters §2): requests (structure, tag, every
//! message) and responses, and the recovery service's REP_RspEntry (07 §8.5). Invariants: no
//! panic; the full hash ignores the resend flag; a response that parses is kept as an entry
//! that rebuilds it byte for byte (`flags.resend` set, tag zero); entries from any bytes are
//! refused or decode, never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vyrn_wire::leb::Reader;
use vyrn_wire::msg::client::{Request, RequestPacket, Response};
use vyrn_wire::msg::rsp_entry::{decode, encode, EntryState, RSP_ENTRY_MAX, RSP_PACKET_MAX};

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
    let mut out = [0u8; RSP_PACKET_MAX];
    if let Ok(p) = Response::parse(data, &KEY) {
        let mut e = [0u8; RSP_ENTRY_MAX];
        let n =
            encode(&mut EntryState::default(), data, &mut e).expect("a parsed response encodes");
        let k = decode(
            &mut EntryState::default(),
            &mut Reader::new(&e[..n]),
            p.session,
            p.resp_seq,
            &mut out,
        )
        .expect("its entry decodes");
        assert_eq!(
            out[..k - 16],
            {
                let mut w = data[..data.len() - 16].to_vec();
                w[17] = 1;
                w
            }[..]
        );
    }
    let mut st = EntryState::default();
    let mut r = Reader::new(data);
    while !r.is_empty() && decode(&mut st, &mut r, 1, 1, &mut out).is_ok() {}
});
