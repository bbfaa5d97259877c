//! Fuzz the control and consensus message parsers (07 §4.8–§4.10, §5, §6.3, §6.5, §7.4, §8.2,
//! §9.3, §10.1, §13.1). Invariant: no panic, no unbounded allocation.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vyrn_wire::msg::consensus::{RepFinalityCert, RepProposal, RepRootCert, RepSealExt};
use vyrn_wire::msg::ctrl::CtrlMsg;
use vyrn_wire::msg::journal::BlockRecordRef;

fuzz_target!(|data: &[u8]| {
    let _ = CtrlMsg::parse(data);
    let _ = RepProposal::parse(data);
    let _ = RepSealExt::parse(data);
    let _ = RepFinalityCert::parse(data);
    let _ = RepRootCert::parse(data);
    let _ = BlockRecordRef::parse(data);
});
