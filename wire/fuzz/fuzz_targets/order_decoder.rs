//! Fuzz the replica's order-stream decoder (07 §3.12) on capture-format input
//! (`u32 LE length ‖ frame` records). The seed corpus holds generated valid captures, so the
//! fuzzer starts deep inside valid streams. Invariants: no panic, no hang, and once a substream
//! failed it keeps returning the same error.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vyrn_wire::corpus::read_capture;
use vyrn_wire::{DecState, Layout, NullSink};

fuzz_target!(|data: &[u8]| {
    // First byte picks the layout, so the single-substream and small layouts are covered too.
    let Some((&sel, rest)) = data.split_first() else { return };
    let layout = match sel % 3 {
        0 => Layout::reference(),
        1 => Layout::two_streams(4),
        _ => Layout { n_lanes: 11, n_streams: 1, pool_mask: 0 },
    };
    let frames: Vec<&[u8]> = match read_capture(rest) {
        Ok(f) => f,
        Err(_) => rest.chunks(64).collect(),
    };
    let mut d = DecState::new(layout).expect("valid layout");
    for (i, f) in frames.iter().enumerate() {
        let before = [d.failed(0), d.failed(1)];
        if let Err(e) = d.on_frame(f, i as u64 * 1000, &mut NullSink) {
            if e.stream < layout.n_streams {
                // Errors are sticky: a stopped substream returns its first error again.
                let first = before[e.stream as usize].unwrap_or(e);
                assert_eq!(e, first);
                assert_eq!(d.failed(e.stream), Some(e));
            }
        }
    }
    let _ = d.tick(u64::MAX);
});
