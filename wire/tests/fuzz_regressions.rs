//! Every input a fuzzer once crashed on, replayed through the fuzz harness itself, so the fix
//! stays fixed without cargo-fuzz; and the checked-in seed corpora decode with no error.

use vyrn_wire::corpus::{fuzz_layout, fuzz_order_decoder, read_capture};
use vyrn_wire::{DecState, NullSink};

fn files(sub: &str) -> Vec<std::path::PathBuf> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz")
        .join(sub);
    let mut v: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("entry").path())
        .collect();
    v.sort();
    assert!(!v.is_empty(), "no inputs in {}", dir.display());
    v
}

#[test]
fn order_decoder_regressions() {
    for p in files("regressions/order_decoder") {
        fuzz_order_decoder(&std::fs::read(&p).expect("read"));
    }
}

#[test]
fn seed_corpora_decode_cleanly() {
    for p in files("corpus/order_decoder") {
        let data = std::fs::read(&p).unwrap();
        let mut d = DecState::new(fuzz_layout(data[0])).unwrap();
        for f in read_capture(&data[1..]).unwrap() {
            d.on_frame(f, 0, &mut NullSink)
                .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        }
    }
}
