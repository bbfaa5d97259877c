//! Fuzz the control and consensus message parsers (07 §4.8–§4.10, §5, §6.3, §6.5, §7.4, §8.2,
//! §9.3, §10.1, §13.1) and the member envelope (`msg::seal`). Invariants: no panic, no unbounded
//! allocation; an envelope opens only once, and the same body re-sealed by the key's holder
//! opens.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vyrn_wire::msg::consensus::{RepFinalityCert, RepProposal, RepRootCert, RepSealExt};
use vyrn_wire::msg::ctrl::CtrlMsg;
use vyrn_wire::msg::journal::BlockRecordRef;
use vyrn_wire::msg::seal::{seal_into, LinkKey, Opener, Sealed};

fuzz_target!(|data: &[u8]| {
    let _ = CtrlMsg::parse(data);
    let _ = RepProposal::parse(data);
    let _ = RepSealExt::parse(data);
    let _ = RepFinalityCert::parse(data);
    let _ = RepRootCert::parse(data);
    let _ = BlockRecordRef::parse(data);
    // The envelope: arbitrary bytes against a receiver that knows senders 0 and 0x80.
    let key = LinkKey::from_bytes([0x42; 32]);
    let mut o = Opener::new(1);
    o.add(0, key.clone());
    o.add(0x80, key.clone());
    if let Ok(s) = Sealed::parse(data) {
        if let Ok((from, body)) = o.open(data) {
            assert_eq!(from, s.from);
            let _ = CtrlMsg::parse(body);
            assert!(o.open(data).is_err(), "an envelope opened twice");
        }
        let mut again = Vec::new();
        assert!(seal_into(
            &mut again,
            &key,
            1,
            0,
            s.seq.wrapping_add(1),
            |b| {
                b.extend_from_slice(s.body);
                true
            }
        ));
        let mut fresh = Opener::new(1);
        fresh.add(0, key);
        assert_eq!(fresh.open(&again).map(|x| x.1), Ok(s.body));
    }
});
