//! Fuzz the snapshot loader (07 §7.5): arbitrary bytes, and mutations of real snapshot files
//! from the seed corpus. Invariants: no panic; a file that loads re-snapshots to the same state
//! commitment and loads again.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vyrn_engine::snapshot::{ReplicationState, SnapMeta};
use vyrn_engine::EngineConfig;

fuzz_target!(|data: &[u8]| {
    // The seed files were written for this config (engine/tests/live_replay.rs, fuzz seeds).
    let cfg = EngineConfig::test_home(3, 3);
    if let Ok((e, hdr)) = vyrn_engine::load::restore(cfg.clone(), data) {
        assert_eq!(e.state_root(), hdr.state_root);
        let again = e.snapshot(&hdr.meta, &hdr.replication);
        let (e2, _) = vyrn_engine::load::restore(cfg, &again).expect("a re-snapshot loads");
        assert_eq!(e2.state_root(), hdr.state_root);
        let _ = (SnapMeta::default(), ReplicationState::default());
    }
});
