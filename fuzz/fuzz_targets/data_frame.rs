//! Fuzz the data-frame parser (07 §5.3). Invariants: no panic; a frame that parses yields
//! packets whose lengths fit inside it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vyrn_wire::msg::data::DataFrame;

fuzz_target!(|data: &[u8]| {
    if let Ok(f) = DataFrame::parse(data) {
        let mut total = 0usize;
        for p in f.packets() {
            total += p.len();
        }
        assert!(total <= data.len());
    }
});
